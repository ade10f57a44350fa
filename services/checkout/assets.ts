/**
 * The checkout page's stylesheet and script, served as files (never inline, so
 * the page's Content-Security-Policy allows no inline code). Their URLs carry a
 * hash of their content, so they can be cached for a year.
 */
import { createHash } from "node:crypto";
import { finalStatuses, payableStatuses, statusTexts } from "./page.ts";

/**
 * Mobile first; every text colour has a contrast of at least 4.5:1 on its
 * background (most over 7:1); focus is always visible.
 */
const css = `:root {
  color-scheme: light;
  --fg: #111827;
  --muted: #4b5563;
  --bg: #eef1f5;
  --card: #ffffff;
  --border: #d1d5db;
  --accent: #1d4ed8;
  --accent-dark: #1e3a8a;
}
*, *::before, *::after { box-sizing: border-box; }
[hidden] { display: none !important; }
html { -webkit-text-size-adjust: 100%; text-size-adjust: 100%; }
body {
  margin: 0;
  min-height: 100vh;
  padding: 16px 12px 32px;
  background: var(--bg);
  color: var(--fg);
  font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
}
a { color: var(--accent); }
:focus-visible { outline: 3px solid var(--accent); outline-offset: 3px; }
.visually-hidden {
  position: absolute; width: 1px; height: 1px; margin: -1px; padding: 0; border: 0;
  overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap;
}

.banner {
  max-width: 28rem;
  margin: 0 auto 12px;
  padding: 10px 14px;
  border: 1px solid #d69e2e;
  border-radius: 10px;
  background: #fff4d6;
  color: #5c3a00;
  font-size: 0.95rem;
}
.banner strong { text-transform: uppercase; letter-spacing: 0.04em; }

.card {
  max-width: 28rem;
  margin: 0 auto;
  padding: 24px 20px;
  border-radius: 16px;
  background: var(--card);
  box-shadow: 0 1px 2px rgba(15, 23, 42, 0.08), 0 8px 24px rgba(15, 23, 42, 0.08);
}
.head { text-align: center; }
.title {
  margin: 0;
  color: var(--muted);
  font-size: 0.875rem;
  font-weight: 600;
  letter-spacing: 0.08em;
  text-transform: uppercase;
}
.amount { margin: 4px 0 0; font-size: 2.25rem; font-weight: 700; line-height: 1.2; overflow-wrap: anywhere; }
.amount-asset { font-weight: 600; }
.network { margin: 4px 0 0; color: var(--muted); }

.status {
  margin: 20px 0;
  padding: 12px 14px;
  border: 1px solid #bfdbfe;
  border-radius: 12px;
  background: #eff6ff;
  color: #1e3a8a;
}
.status[data-status="underpaid"] { border-color: #f0b429; background: #fffbeb; color: #713f12; }
.status[data-status="confirmed"], .status[data-status="overpaid"], .status[data-status="late"] {
  border-color: #86efac; background: #f0fdf4; color: #14532d;
}
.status[data-status="expired"], .status[data-status="cancelled"] { border-color: #fca5a5; background: #fef2f2; color: #7f1d1d; }
.status-title { margin: 0; font-size: 1.125rem; font-weight: 700; }
.status-detail { margin: 4px 0 0; }
.status-detail:empty { display: none; }

.pay { display: flex; flex-direction: column; gap: 20px; }
.qr { margin: 0; text-align: center; }
.qr-code {
  display: block;
  width: min(100%, 232px);
  height: auto;
  margin: 0 auto;
  border: 1px solid var(--border);
  border-radius: 8px;
}
.qr figcaption { margin-top: 6px; color: var(--muted); font-size: 0.9rem; }

.field { margin: 0; }
.label { margin: 0 0 6px; color: var(--muted); font-size: 0.875rem; font-weight: 600; }
.address {
  display: block;
  padding: 10px 12px;
  border: 1px solid var(--border);
  border-radius: 8px;
  background: #f3f4f6;
  color: var(--fg);
  font: 15px/1.45 ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace;
  word-break: break-all;
  -webkit-user-select: all;
  user-select: all;
}
.actions { display: flex; flex-wrap: wrap; gap: 8px; margin-top: 10px; }
.button {
  display: inline-flex;
  flex: 1 1 10rem;
  align-items: center;
  justify-content: center;
  min-height: 44px;
  padding: 10px 16px;
  border: 2px solid var(--accent);
  border-radius: 10px;
  background: var(--accent);
  color: #ffffff;
  font: inherit;
  font-weight: 600;
  text-align: center;
  text-decoration: none;
  cursor: pointer;
}
.button:hover { border-color: var(--accent-dark); background: var(--accent-dark); }
.button-secondary { background: #ffffff; color: var(--accent); }
.button-secondary:hover { background: #eff6ff; color: var(--accent-dark); }
.copy-status { min-height: 1.5em; margin: 6px 0 0; color: #14532d; font-size: 0.9rem; }
.copy-status:empty { min-height: 0; margin: 0; }

.countdown { margin: 0; color: var(--muted); text-align: center; }
.countdown time { color: var(--fg); font-weight: 700; font-variant-numeric: tabular-nums; }
.note { margin: 16px 0 0; color: var(--muted); font-size: 0.9rem; }
.foot {
  margin-top: 20px;
  padding-top: 12px;
  border-top: 1px solid #e5e7eb;
  color: var(--muted);
  font-size: 0.8rem;
  text-align: center;
}
.ref { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace; overflow-wrap: anywhere; }

/* Wider screens pay from another device: the QR code comes first. */
@media (min-width: 600px) {
  body { padding-top: 48px; }
  .card { padding: 32px; }
  .countdown { order: -2; }
  .qr { order: -1; }
}
`;

/**
 * Live status (polls status.json every 3 s until a final status), the countdown
 * and the copy button. The page says everything without it; this only keeps it current.
 */
const js = `(function () {
  "use strict";
  var TEXTS = ${JSON.stringify(statusTexts)};
  var FINAL = ${JSON.stringify(finalStatuses)};
  var PAYABLE = ${JSON.stringify(payableStatuses)};
  var POLL_MS = 3000;

  var root = document.getElementById("checkout");
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
    expiresAt: Date.parse(attr("data-expires-at"))
  };
  // The server's clock at render time: the countdown follows it, not a wrong phone clock.
  var serverNow = Date.parse(attr("data-now"));
  var skew = isNaN(serverNow) ? 0 : serverNow - Date.now();

  function fill(template) {
    var values = { requested: state.requested, due: state.due, received: state.received, asset: state.asset };
    return template.replace(/\\{(\\w+)\\}/g, function (m, name) {
      return Object.prototype.hasOwnProperty.call(values, name) ? values[name] : m;
    });
  }
  function isFinal() { return FINAL.indexOf(state.status) >= 0; }

  function render() {
    var text = Object.prototype.hasOwnProperty.call(TEXTS, state.status) ? TEXTS[state.status] : { title: state.status, detail: "" };
    root.setAttribute("data-status", state.status);
    var box = $("status");
    if (box) box.setAttribute("data-status", state.status);
    setText($("status-title"), text.title);
    setText($("status-detail"), fill(text.detail));
    var pay = $("pay");
    if (pay) pay.hidden = PAYABLE.indexOf(state.status) < 0;
    document.title = text.title + " \\u2014 " + state.requested + " " + state.asset;
    refreshQr();
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
  function tick() {
    if (!countdown || isNaN(state.expiresAt)) return;
    setText(countdown, remaining(state.expiresAt - (Date.now() + skew)));
  }
  tick();
  var ticker = setInterval(tick, 1000);

  // Live status.
  var url = attr("data-status-url");
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
        if (s && typeof s.status === "string") {
          state.status = s.status;
          state.received = typeof s.amount_received === "string" ? s.amount_received : "0";
          state.due = typeof s.amount_due === "string" ? s.amount_due : "0";
          var expires = Date.parse(s.expires_at || "");
          if (!isNaN(expires)) state.expiresAt = expires;
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
      var text = copy.getAttribute("data-copy") || "";
      if (navigator.clipboard && navigator.clipboard.writeText) {
        navigator.clipboard.writeText(text).then(function () { copied(true); }, function () { copied(selectAddress()); });
      } else {
        copied(selectAddress());
      }
    });
  }
})();
`;

export interface Asset {
  body: Buffer;
  contentType: string;
  /** A hash of the content: the URL's ?v= and the ETag. */
  version: string;
}

function asset(text: string, contentType: string): Asset {
  const body = Buffer.from(text, "utf8");
  return { body, contentType, version: createHash("sha256").update(body).digest("hex").slice(0, 16) };
}

/** The files under <checkout path>/assets/, by name. */
export const checkoutAssets: Readonly<Record<string, Asset>> = {
  "checkout.css": asset(css, "text/css; charset=utf-8"),
  "checkout.js": asset(js, "text/javascript; charset=utf-8"),
};

/** The URLs the page links, each with its content hash. */
export function assetUrls(base: string): { css: string; js: string } {
  const url = (name: string) => `${base}/assets/${name}?v=${checkoutAssets[name]?.version ?? ""}`;
  return { css: url("checkout.css"), js: url("checkout.js") };
}
