// @ts-check
// The checkout page's script: live status (polls status.json every 3 s until a final status), the
// countdown and the copy button. The page says everything without it; this only keeps it current.
// Served as a file (the page's Content-Security-Policy allows no inline code), ES5 so that any
// phone's browser runs it, and type-checked (tsconfig.json beside it). The server replaces the
// /*…*/ placeholders with the status texts of services/checkout/page.ts when it loads this file.
(function () {
  "use strict";
  /** @type {Record<string, { title: string, detail: string }>} */
  var TEXTS = /*TEXTS*/ {};
  /** @type {string[]} */
  var FINAL = /*FINAL*/ [];
  /** @type {string} */
  var OTHER_ASSET_TEXT = /*OTHER_ASSET_TEXT*/ "";
  /** @type {string} */
  var SEEN_TEXT = /*SEEN_TEXT*/ "";
  /** @type {{ title?: string, detail?: string }} */
  var SEEN_STATUS = /*SEEN_STATUS*/ {};
  /** @type {string[]} */
  var PAYABLE = /*PAYABLE*/ [];
  /** @type {Record<string, { link: string, label: string }>} */
  var RETURNS = /*RETURNS*/ {};
  var POLL_MS = 3000;

  // Checked just below; the cast keeps the check in force inside the functions that follow.
  var root = /** @type {HTMLElement} */ (document.getElementById("checkout"));
  if (!root) return;
  function $(id) { return document.getElementById(id); }
  function attr(name) { return root.getAttribute(name) || ""; }
  function setText(el, text) { if (el && el.textContent !== text) el.textContent = text; }

  var state = {
    status: attr("data-status"),
    requested: attr("data-requested"),
    asset: attr("data-asset"),
    received: attr("data-received") || "0",
    due: attr("data-due") || "0",
    pending: attr("data-pending") || "0",
    confirmations: attr("data-confirmations") || "0",
    // The confirmations so far of what is pending: the progress "1 of 12".
    seen: attr("data-seen") || "0",
    expiresAt: Date.parse(attr("data-expires-at")),
    // A fiat-priced intent's quote: until when its rate holds (NaN on other intents).
    quoteExpiresAt: Date.parse(attr("data-quote-expires-at"))
  };
  // The server's clock at render time: the countdown follows it, not a wrong phone clock.
  var serverNow = Date.parse(attr("data-now"));
  var skew = isNaN(serverNow) ? 0 : serverNow - Date.now();

  function fill(template) {
    var values = { requested: state.requested, due: state.due, received: state.received, asset: state.asset, pending: state.pending, confirmations: state.confirmations, seen: state.seen };
    return template.replace(/\{(\w+)\}/g, function (m, name) {
      return Object.prototype.hasOwnProperty.call(values, name) ? values[name] : m;
    });
  }
  function isFinal() { return FINAL.indexOf(state.status) >= 0; }

  // As the page's covers(): what is seen but not counting covers what is due (decimal strings,
  // compared digit by digit: no BigInt on the older phones this page serves).
  /** @param {string} pending @param {string} due */
  function covers(pending, due) {
    /** @param {string} x */
    function parts(x) {
      var s = x.split(".");
      return { i: (s[0] || "0").replace(/^0+(?=\d)/, ""), f: s[1] || "" };
    }
    var p = parts(pending), d = parts(due);
    var places = Math.max(p.f.length, d.f.length);
    var pf = p.f + new Array(places - p.f.length + 1).join("0"), df = d.f + new Array(places - d.f.length + 1).join("0");
    if (/^0*$/.test(p.i + pf)) return false;
    if (p.i.length !== d.i.length) return p.i.length > d.i.length;
    return p.i + pf >= d.i + df;
  }
  function seenCovers() { return PAYABLE.indexOf(state.status) >= 0 && covers(state.pending, state.due); }

  function render() {
    var text = seenCovers() ? { title: SEEN_STATUS.title || "", detail: SEEN_STATUS.detail || "" } : Object.prototype.hasOwnProperty.call(TEXTS, state.status) ? TEXTS[state.status] : { title: state.status, detail: "" };
    root.setAttribute("data-status", state.status);
    var box = $("status");
    if (box) box.setAttribute("data-status", state.status);
    setText($("status-title"), text.title);
    setText($("status-detail"), fill(text.detail));
    // A fiat-priced intent's amount changes when a lapsed quote is replaced.
    setText($("amount"), state.requested);
    var pay = $("pay");
    // Paid in full and waiting for confirmations: nothing more to send (no countdown, address or QR code).
    if (pay) pay.hidden = PAYABLE.indexOf(state.status) < 0 || seenCovers();
    document.title = text.title + " \u2014 " + state.requested + " " + state.asset;
    renderSeen();
    renderReturnLinks();
    refreshQr();
  }

  // A payment seen on the chain that does not count yet: "payment seen, waiting for N confirmations".
  function renderSeen() {
    var note = $("seen");
    if (!note) return;
    var show = PAYABLE.indexOf(state.status) >= 0 && !/^0(\.0*)?$/.test(state.pending) && !seenCovers();
    note.hidden = !show;
    if (show) setText(note, SEEN_TEXT.replace("{pending}", state.pending).replace("{asset}", state.asset).replace("{confirmations}", state.confirmations));
  }

  // Another asset received at the address: it does not count, and the shopper is told whom to ask.
  /** @param {unknown[]} others */
  function renderOtherAssets(others) {
    var note = $("other-assets");
    if (!note) return;
    var names = others.filter(function (x) { return typeof x === "string"; }).join(", ");
    note.hidden = names === "";
    if (names !== "") setText(note, OTHER_ASSET_TEXT.replace("{other}", names).replace("{asset}", state.asset));
  }

  // The way back to the shop the status calls for (the server rendered both links it has).
  function renderReturnLinks() {
    var shown = Object.prototype.hasOwnProperty.call(RETURNS, state.status) ? RETURNS[state.status] : null;
    ["redirect", "cancel"].forEach(function (kind) {
      var a = $("return-" + kind);
      if (!a) return;
      var on = shown !== null && shown.link === kind;
      a.hidden = !on;
      if (on && shown) setText(a, shown.label.replace("{host}", a.getAttribute("data-host") || ""));
    });
  }

  // The QR code and wallet link ask for what is left to pay: once that changes (underpaid), the
  // stale ones hide and the page's own HTML, fetched again, supplies new ones. No reload.
  var pageUrl = attr("data-page-url");
  var refreshing = false;
  function amountToPay() { return state.status === "underpaid" ? state.due : state.requested; }
  function refreshQr() {
    var qr = $("qr");
    if (!qr || !pageUrl || refreshing || PAYABLE.indexOf(state.status) < 0 || qr.getAttribute("data-amount") === amountToPay()) return;
    var wallet = $("wallet");
    qr.hidden = true;
    if (wallet) wallet.hidden = true;
    refreshing = true;
    fetch(pageUrl, { cache: "no-store", credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (res) {
        if (!res.ok) throw new Error("status " + res.status);
        return res.text();
      })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html");
        ["qr", "wallet"].forEach(function (id) {
          var next = fresh.getElementById(id);
          var old = $(id);
          if (old && next) old.replaceWith(document.importNode(next, true));
        });
      })
      .then(function () { refreshing = false; }, function () { refreshing = false; });
  }

  // Countdown to expires_at.
  var countdown = $("countdown");
  function pad(n) { return (n < 10 ? "0" : "") + n; }
  function remaining(ms) {
    var total = Math.max(0, Math.floor(ms / 1000));
    var h = Math.floor(total / 3600), m = Math.floor((total % 3600) / 60), s = total % 60;
    return h > 0 ? h + ":" + pad(m) + ":" + pad(s) : m + ":" + pad(s);
  }
  // A fiat-priced intent's rate holds until its quote's expiry (at most the intent's); once that
  // passes, a note says the rate is being updated until the next status brings the new quote.
  var quoteCountdown = $("quote-countdown");
  var quoteLapsed = $("quote-lapsed");
  function tick() {
    if (isNaN(state.expiresAt)) return;
    var now = Date.now() + skew;
    if (countdown) setText(countdown, remaining(state.expiresAt - now));
    var quoteEnds = isNaN(state.quoteExpiresAt) ? state.expiresAt : state.quoteExpiresAt;
    if (quoteCountdown) setText(quoteCountdown, remaining(quoteEnds - now));
    if (quoteLapsed) quoteLapsed.hidden = !(PAYABLE.indexOf(state.status) >= 0 && quoteEnds < state.expiresAt && quoteEnds <= now);
  }
  tick();
  var ticker = setInterval(tick, 1000);

  // Live status.
  var url = attr("data-status-url");
  // The method picker of an intent offering several: nothing on it changes but by a reload.
  var picker = root.hasAttribute("data-picker");
  var delay = POLL_MS;
  var timer = null;
  function schedule(ms) {
    if (timer !== null) clearTimeout(timer);
    timer = isFinal() ? null : setTimeout(poll, ms);
  }
  function poll() {
    timer = null;
    if (!url || isFinal()) return;
    fetch(url, { cache: "no-store", credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (res) {
        if (res.status === 404) return null;
        if (!res.ok) throw new Error("status " + res.status);
        return res.json();
      })
      .then(function (s) {
        if (s === null) return;
        // An intent offering several methods: once a payment chose one (or, on the picker, once the
        // status moved), the page the server renders now shows only what applies.
        var chosenNow = s && typeof s.method === "string" && s.method !== attr("data-method");
        if (chosenNow || (picker && s && s.status !== state.status)) {
          window.location.replace(pageUrl);
          return;
        }
        if (picker) {
          schedule(POLL_MS);
          return;
        }
        if (s && typeof s.status === "string") {
          state.status = s.status;
          state.received = typeof s.amount_received === "string" ? s.amount_received : "0";
          state.due = typeof s.amount_due === "string" ? s.amount_due : "0";
          state.pending = typeof s.amount_pending === "string" ? s.amount_pending : "0";
          if (typeof s.required_confirmations === "number") state.confirmations = String(s.required_confirmations);
          state.seen = typeof s.pending_confirmations === "number" ? String(s.pending_confirmations) : "0";
          renderOtherAssets(Array.isArray(s.other_assets_received) ? s.other_assets_received : []);
          var expires = Date.parse(s.expires_at || "");
          if (!isNaN(expires)) state.expiresAt = expires;
          if (typeof s.requested_amount === "string") state.requested = s.requested_amount;
          if (s.quote && typeof s.quote === "object") {
            if (typeof s.quote.rate === "string") setText($("quote-rate"), s.quote.rate);
            var quoteExpires = Date.parse(s.quote.expires_at || "");
            if (!isNaN(quoteExpires)) state.quoteExpiresAt = quoteExpires;
          }
          render();
          tick();
        }
        if (isFinal()) clearInterval(ticker);
        delay = POLL_MS;
        schedule(delay);
      }, function () {
        delay = Math.min(delay * 2, 30000);
        schedule(delay);
      });
  }
  schedule(POLL_MS);
  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState === "visible" && timer !== null) schedule(0);
  });

  // Copy button: shown only where it can work; the address stays selectable without it.
  var copy = $("copy");
  var copyStatus = $("copy-status");
  function selectAddress() {
    var el = $("address");
    if (!el || !window.getSelection) return false;
    var range = document.createRange();
    range.selectNodeContents(el);
    var selection = window.getSelection();
    if (!selection) return false;
    selection.removeAllRanges();
    selection.addRange(range);
    try { return document.execCommand("copy"); } catch (e) { return false; }
  }
  function copied(ok) {
    setText(copyStatus, ok ? "Address copied." : "Could not copy: select the address above and copy it.");
    if (ok) setTimeout(function () { setText(copyStatus, ""); }, 5000);
  }
  if (copy) {
    copy.hidden = false;
    copy.addEventListener("click", function () {
      var text = /** @type {HTMLElement} */ (copy).getAttribute("data-copy") || "";
      if (navigator.clipboard && navigator.clipboard.writeText) {
        navigator.clipboard.writeText(text).then(function () { copied(true); }, function () { copied(selectAddress()); });
      } else {
        copied(selectAddress());
      }
    });
  }
})();
