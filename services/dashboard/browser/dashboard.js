// The dashboard's one script, an enhancement only: every page works without it.
// - A one-time link's page (…/link#token=…) moves the token from the fragment into its form and
//   sends it, so the token never sits in the address bar or the history; a browser signed in
//   already is asked first (the form's button), so a link cannot switch its shop unseen.
// - Copy buttons (the signing secret, shown once) copy their data-copy text.
(function () {
  "use strict";

  var form = /** @type {HTMLFormElement | null} */ (document.getElementById("link-form"));
  var field = /** @type {HTMLInputElement | null} */ (document.getElementById("link-token"));
  var match = /^#token=([A-Za-z0-9_]+)$/.exec(window.location.hash);
  if (form && field && match) {
    field.value = match[1];
    // Out of the address bar and history before anything else happens.
    if (window.history && window.history.replaceState) window.history.replaceState(null, "", window.location.pathname);
    // Signed in already (data-confirm): the merchant decides, by the form's own button.
    if (!form.hasAttribute("data-confirm")) form.submit();
  }

  function copyText(text) {
    if (navigator.clipboard && navigator.clipboard.writeText) {
      return navigator.clipboard.writeText(text).then(
        function () { return true; },
        function () { return false; },
      );
    }
    return Promise.resolve(false);
  }

  var buttons = document.querySelectorAll("button[data-copy]");
  for (var i = 0; i < buttons.length; i++) {
    (function (button) {
      var status = button.parentElement ? button.parentElement.querySelector(".copy-status") : null;
      button.hidden = false;
      button.addEventListener("click", function () {
        copyText(button.getAttribute("data-copy") || "").then(function (ok) {
          if (status) status.textContent = ok ? "Copied." : "Could not copy: select the text above and copy it.";
        });
      });
    })(/** @type {HTMLButtonElement} */ (buttons[i]));
  }
})();
