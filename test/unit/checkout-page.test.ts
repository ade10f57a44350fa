// The hosted checkout page's rendering: escaping, the Test banner, every status's text, the
// amount still due, the QR code, and no inline code (the page's CSP forbids it).
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import t from "tap";
import { ShopperPaymentIntentSchema, type ShopperPaymentIntent } from "../../gen/payments/v1/shopper_pb.ts";
import { checkoutAssets } from "../../services/checkout/assets.ts";
import { amountDue } from "../../services/intents/funds.ts";
import {
  checkoutStatus,
  escapeHtml,
  formatRemaining,
  networkLabel,
  renderCheckoutPage,
  renderErrorPage,
  renderNotFoundPage,
  returnLinks,
  statusTexts,
  unwatchedText,
  type PageView,
} from "../../services/checkout/page.ts";

const now = new Date("2026-03-01T12:00:00.000Z");
const address = "0x9858EfFD232B4033E47d90003D41EC34EcaEda94";

/** A one-method intent's shopper view, as the page reads it (its method fields set). */
function view(fields: MessageInitShape<typeof ShopperPaymentIntentSchema> = {}): ShopperPaymentIntent & PageView {
  const v = create(ShopperPaymentIntentSchema, {
    publicId: "pi_0123456789abcdefghijABCD",
    status: "pending",
    network: "ethereum",
    asset: "USDC",
    requestedAmount: "12.50",
    depositAddress: address,
    paymentUri: `ethereum:0x1c7D4B196Cb0C7B01d743Fbc6116a902379C7238@11155111/transfer?address=${address}&uint256=12500000`,
    checkoutUrl: "https://pay.example.test/checkout/pi_0123456789abcdefghijABCD",
    expiresAt: timestampFromDate(new Date(now.getTime() + 14 * 60_000 + 59_000)),
    createdAt: timestampFromDate(now),
    watched: true,
    ...fields,
  });
  return { ...v, network: v.network ?? "", asset: v.asset ?? "", requestedAmount: v.requestedAmount ?? "" };
}

/** The page's own tags with their attribute values blanked: data can add no tag or attribute, as it cannot hold a raw < or ". */
function tags(html: string): string[] {
  return (html.match(/<[a-zA-Z][^>]*>/g) ?? []).map((tag) => tag.replace(/"[^"]*"/g, '""'));
}

/** The page's visible text, roughly: tags dropped, entities of the escaper decoded. */
function text(html: string): string {
  return html
    .replace(/<title[^>]*>[\s\S]*?<\/title>/g, " ")
    .replace(/<[^>]+>/g, " ")
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">")
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&amp;/g, "&")
    .replace(/\s+/g, " ");
}

t.test("escapeHtml", async (t) => {
  t.equal(escapeHtml(`<script>alert("x")</script>`), "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;");
  t.equal(escapeHtml(`a & b 'c'`), "a &amp; b &#39;c&#39;");
  t.equal(escapeHtml("&amp;"), "&amp;amp;", "escapes what is already escaped again: text stays text");
  t.equal(escapeHtml("plain 12.50 USDC"), "plain 12.50 USDC");
});

t.test("HTML and JS in any field is escaped wherever it is shown", async (t) => {
  const evil = `"><script>alert(1)</script><img src=x onerror=alert(2)>'`;
  const html = await renderCheckoutPage(
    view({ publicId: evil, status: evil, network: evil, asset: evil, requestedAmount: evil, amountReceived: evil, depositAddress: evil, paymentUri: evil }),
    true,
    now,
  );
  t.notMatch(html, /<script>alert/, "no script element from data");
  t.notMatch(html, /<img/i, "no element from data");
  t.same(tags(html).filter((tag) => /\son[a-z]+=/i.test(tag)), [], "no handler attribute from data");
  t.equal((html.match(/<script\b/g) ?? []).length, 1, "only the page's own external script");
  t.match(html, /&lt;script&gt;alert\(1\)&lt;\/script&gt;/, "shown as text");
  t.match(html, /data-copy="&quot;&gt;&lt;script&gt;/, "attribute values escaped too");
});

t.test("a full HTML5 document with no inline code (CSP: no inline scripts or styles)", async (t) => {
  for (const html of [await renderCheckoutPage(view(), true, now), await renderCheckoutPage(view({ status: "confirmed" }), false, now), renderNotFoundPage(), renderErrorPage("internal")]) {
    t.match(html, /^<!doctype html>\n<html lang="en">/);
    t.match(html, /<meta name="viewport" content="width=device-width, initial-scale=1">/);
    t.same(tags(html).filter((tag) => /\sstyle=/i.test(tag)), [], "no style attribute");
    t.notMatch(html, /<style/i, "no style element");
    t.same(tags(html).filter((tag) => /\son[a-z]+=/i.test(tag)), [], "no event handler attribute");
    t.notMatch(html, /href="javascript:/i);
    for (const tag of html.match(/<script\b[^>]*>[\s\S]*?<\/script>/g) ?? []) {
      t.match(tag, /^<script src="[^"]+" defer><\/script>$/, "scripts are external and empty");
    }
  }
  const html = await renderCheckoutPage(view(), false, now, { base: "/pay", css: "/pay/assets/checkout.css?v=1", js: "/pay/assets/checkout.js?v=1" });
  t.match(html, /<link rel="stylesheet" href="\/pay\/assets\/checkout.css\?v=1">/);
  t.match(html, /<script src="\/pay\/assets\/checkout.js\?v=1" defer><\/script>/);
  t.match(html, /data-status-url="\/pay\/pi_0123456789abcdefghijABCD\/status.json"/);
});

t.test("the facts a shopper needs, and only those", async (t) => {
  const html = await renderCheckoutPage(view(), true, now);
  const shown = text(html);
  t.match(shown, "12.50 USDC");
  t.match(shown, "on Ethereum Sepolia testnet");
  t.match(shown, `Deposit address ${address}`);
  t.match(shown, "Time left to pay 14:59");
  t.match(html, /<time id="countdown" datetime="2026-03-01T12:14:59.000Z">14:59<\/time>/);
  t.match(html, /<button type="button" class="button" id="copy" data-copy="0x9858[^"]+" hidden>Copy address<\/button>/, "copy button, shown by the JS");
  t.match(html, /<h2 class="label" id="address-label">Deposit address<\/h2>\n  <code class="address" id="address">0x9858/, "the address, selectable without JS");
  t.match(html, /<a class="button button-secondary" id="wallet" href="ethereum:0x1c7D[^"]*&amp;uint256=12500000">Open in wallet app<\/a>/);
  t.match(html, /<noscript>/, "says how to refresh without JS");
  t.notMatch(shown, "checkout_url", "no merchant fields");
  t.notMatch(html, "pay.example.test", "nor the checkout URL's host");
});

t.test("the QR code: inline SVG of payment_uri with an accessible name", async (t) => {
  const html = await renderCheckoutPage(view(), false, now);
  t.match(html, /<svg class="qr-code" role="img" aria-labelledby="qr-title" focusable="false" xmlns="http:\/\/www.w3.org\/2000\/svg"[^>]*><title id="qr-title">QR code to pay 12.50 USDC on Ethereum<\/title><path/);
  t.match(html, /<figcaption>Scan with your wallet app<\/figcaption>/);
  t.match(html, /<figure class="qr" id="qr" data-amount="12.50">/);
  t.match(html, /<title id="qr-title">[^<]*<\/title><path/, "the title comes first in the SVG");
  const none = await renderCheckoutPage(view({ paymentUri: undefined }), false, now);
  t.notMatch(none, /<svg/, "no URI, no QR code");
});

t.test("underpaid: the QR code and wallet link ask for the amount still due", async (t) => {
  const html = await renderCheckoutPage(view({ status: "underpaid", amountReceived: "6.2" }), true, now);
  t.match(html, /<figure class="qr" id="qr" data-amount="6.3">/);
  t.match(html, /<title id="qr-title">QR code to pay 6.3 USDC on Ethereum Sepolia testnet<\/title>/);
  t.match(html, /id="wallet" href="ethereum:0x1c7D4B196Cb0C7B01d743Fbc6116a902379C7238@11155111\/transfer\?address=0x9858EfFD232B4033E47d90003D41EC34EcaEda94&amp;uint256=6300000"/);
  const pending = await renderCheckoutPage(view(), true, now);
  t.match(pending, `href="${escapeHtml(view().paymentUri ?? "")}"`, "pending: the intent's own payment_uri");
});

t.test("the Test mode banner only for Test intents", async (t) => {
  const test = await renderCheckoutPage(view(), true, now);
  const live = await renderCheckoutPage(view({ paymentUri: "ethereum:0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48@1/transfer" }), false, now);
  t.match(test, /<p class="banner" role="note"><strong>Test mode<\/strong>/);
  t.notMatch(live, /Test mode/i);
  t.notMatch(live, /class="banner"/);
  t.match(text(live), "on Ethereum ", "the Live network's name");
});

t.test("every status's text; payment instructions only while it can be paid", async (t) => {
  const cases: [string, string, MessageInitShape<typeof ShopperPaymentIntentSchema>, RegExp?][] = [
    ["pending", "Waiting for payment", {}, /Send exactly 12.50 USDC/],
    ["underpaid", "Partly paid", { amountReceived: "6.2" }, /Amount still due: 6.3 USDC/],
    ["confirmed", "Paid", { amountReceived: "12.5" }],
    ["overpaid", "Paid (more than requested)", { amountReceived: "13.75" }, /We received 13.75 USDC/],
    ["late", "Paid after expiry — the merchant will be in touch", { amountReceived: "12.5" }],
    ["expired", "Expired", {}, /Do not send funds/],
    ["cancelled", "Cancelled", {}, /Do not send funds/],
  ];
  t.same(Object.keys(statusTexts).sort(), cases.map(([s]) => s).sort(), "a text for every status");
  for (const [status, title, fields, detail] of cases) {
    const html = await renderCheckoutPage(view({ status, ...fields }), false, now);
    t.match(html, `<p class="status-title" id="status-title">${escapeHtml(title)}</p>`, status);
    t.match(html, new RegExp(`<section class="status" id="status" data-status="${status}" role="status" aria-live="polite"`), `${status}: a live region`);
    if (detail) t.match(text(html), detail, `${status}: detail`);
    const payable = status === "pending" || status === "underpaid";
    t.equal(/<section class="pay" id="pay" aria-label="How to pay" hidden>/.test(html), !payable, `${status}: instructions ${payable ? "shown" : "hidden"}`);
  }
  t.match(await renderCheckoutPage(view({ status: "something_new" }), false, now), /id="status-title">something_new</, "an unknown status shows as itself");
});

t.test("the way back to the shop: redirect_url once paid, cancel_url while pending and after, neither while underpaid", async (t) => {
  const urls = { redirectUrl: "https://shop.example/orders/1001/thanks", cancelUrl: "https://shop.example/cart?order=1001&from=pay" };
  const link = (html: string, kind: string) => new RegExp(`<a class="button button-secondary" id="return-${kind}" href="[^"]*" data-host="shop.example"( hidden)?>([^<]*)</a>`).exec(html);
  const cases: [string, string | undefined, string | undefined][] = [
    ["pending", "cancel", "Cancel and return to shop.example"],
    ["underpaid", undefined, undefined],
    ["confirmed", "redirect", "Back to shop.example"],
    ["overpaid", "redirect", "Back to shop.example"],
    ["late", "redirect", "Back to shop.example"],
    ["expired", "cancel", "Back to shop.example"],
    ["cancelled", "cancel", "Back to shop.example"],
  ];
  t.same(Object.keys(statusTexts).sort(), cases.map(([s]) => s).sort(), "every status is decided");
  for (const [status, shown, label] of cases) {
    const html = await renderCheckoutPage(view({ status, ...urls }), false, now);
    for (const kind of ["redirect", "cancel"]) {
      const a = link(html, kind);
      t.ok(a, `${status}: the ${kind} link is on the page for the script`);
      t.equal(a?.[1] === undefined, kind === shown, `${status}: the ${kind} link ${kind === shown ? "shows" : "is hidden"}`);
      if (kind === shown) t.equal(a?.[2], label, `${status}: "${label}"`);
    }
  }
  const html = await renderCheckoutPage(view({ status: "pending", ...urls }), false, now);
  t.match(html, 'href="https://shop.example/cart?order=1001&amp;from=pay"', "the URL as given, escaped for HTML");
  t.match(html, '<nav class="return" aria-label="Back to the shop">');
  const none = await renderCheckoutPage(view({ status: "confirmed" }), false, now);
  t.notMatch(none, /class="return"|id="return-/, "no URL given: no way back offered");
  const one = await renderCheckoutPage(view({ status: "pending", redirectUrl: urls.redirectUrl }), false, now);
  t.ok(link(one, "redirect"), "only a redirect_url: that link, hidden while pending");
  t.notOk(link(one, "cancel"), "and no cancel link");

  const evil = `https://shop.example/"><script>alert(1)</script><img src=x onerror=alert(2)>`;
  const escaped = await renderCheckoutPage(view({ status: "confirmed", redirectUrl: evil, cancelUrl: evil }), false, now);
  t.notMatch(escaped, /<script>alert|<img/, "markup in a URL stays inside its attribute");
  t.equal((escaped.match(/<script\b/g) ?? []).length, 1, "only the page's own script");
});

t.test("amount still due: requested − received with the asset's decimals", async (t) => {
  t.equal(amountDue(view({ status: "underpaid", amountReceived: "6.25" })), "6.25");
  t.equal(amountDue(view({ status: "underpaid", requestedAmount: "1", asset: "ETH", amountReceived: "0.999999999999999999" })), "0.000000000000000001", "18 decimals, no float");
  t.equal(amountDue(view({ status: "underpaid", network: "bitcoin", asset: "BTC", requestedAmount: "0.3", amountReceived: "0.1" })), "0.2", "0.3 − 0.1 is 0.2");
  t.equal(amountDue(view({ status: "pending" })), "12.5", "pending: all of it");
  t.equal(amountDue(view({ status: "overpaid", amountReceived: "13" })), "0");
  t.equal(amountDue(view({ status: "expired" })), "0", "nothing is due once it cannot be paid");
  t.equal(amountDue(view({ status: "underpaid", amountReceived: "20" })), "0", "never below zero");
});

t.test("status JSON: eight shopper-safe keys", async (t) => {
  t.same(checkoutStatus(view({ status: "underpaid", amountReceived: "6.25" })), {
    status: "underpaid",
    amount_received: "6.25",
    amount_pending: null,
    required_confirmations: 0,
    pending_confirmations: null,
    amount_due: "6.25",
    expires_at: "2026-03-01T12:14:59.000Z",
    other_assets_received: [],
  });
  t.same(Object.keys(checkoutStatus(view())).sort(), ["amount_due", "amount_pending", "amount_received", "expires_at", "other_assets_received", "pending_confirmations", "required_confirmations", "status"]);
  t.equal(checkoutStatus(view()).amount_received, null, "unset until funds are seen");
});

t.test("countdown text", async (t) => {
  t.equal(formatRemaining(899_000), "14:59");
  t.equal(formatRemaining(59_999), "0:59");
  t.equal(formatRemaining(86_400_000), "24:00:00");
  t.equal(formatRemaining(3_601_000), "1:00:01");
  t.equal(formatRemaining(-5000), "0:00");
});

t.test("the 404 page says nothing about the request", async (t) => {
  const html = renderNotFoundPage();
  t.match(html, /<h1 class="title">Payment not found<\/h1>/);
  t.notMatch(html, /<script/, "no script");
});

t.test("assets: the JS carries the same status texts; the CSS shows focus", async (t) => {
  const js = checkoutAssets["checkout.js"]?.body.toString() ?? "";
  t.match(js, JSON.stringify(statusTexts));
  t.match(js, /setInterval\(tick, 1000\)/);
  t.match(js, /POLL_MS = 3000/);
  t.doesNotThrow(() => new Function(js), "the JS parses");
  const css = checkoutAssets["checkout.css"]?.body.toString() ?? "";
  t.match(css, /:focus-visible \{ outline: 3px solid/);
  t.equal(checkoutAssets["checkout.css"]?.contentType, "text/css; charset=utf-8");
  t.equal(checkoutAssets["checkout.js"]?.contentType, "text/javascript; charset=utf-8");
});

t.test("the served script is the browser file with the status texts in place of its placeholders", async (t) => {
  const js = checkoutAssets["checkout.js"]?.body.toString("utf8") ?? "";
  t.notMatch(js, /\/\*(TEXTS|FINAL|PAYABLE|RETURNS)\*\//, "no placeholder left");
  t.match(js, `var RETURNS = ${JSON.stringify(returnLinks)};`, "the ways back to the shop, as the page renders them");
  t.match(js, /var TEXTS = \{"pending":\{"title":"Waiting for payment"/);
  t.match(js, /var FINAL = \["confirmed","overpaid","late","expired","cancelled"\];/);
  t.match(checkoutAssets["checkout.css"]?.body.toString("utf8") ?? "", /^:root \{/, "the stylesheet is the browser file");
});

t.test("another asset received at the address: the page says it does not count and whom to ask", async (t) => {
  const html = await renderCheckoutPage(view({ otherAssetsReceived: ["USDT"] }), false, now);
  t.match(text(html), "We also received USDT at this address, which this payment does not take: it does not count toward the USDC due. Contact the merchant to sort it out.");
  t.match(html, /<p class="note note-warning" id="other-assets" role="alert">/, "shown");
  t.match(await renderCheckoutPage(view(), false, now), /id="other-assets" role="alert" hidden>/, "present but hidden when there is none, for the live refresh");
  t.same(checkoutStatus(view({ otherAssetsReceived: ["USDT"] })).other_assets_received, ["USDT"]);
});

t.test("a payment seen but not counting that covers what is due: the status box says it is seen, not to send it", async (t) => {
  const { covers, statusText, seenNotice } = await import("../../services/checkout/page.ts");
  t.same([covers("0.031", "0.031"), covers("0.0311", "0.031"), covers("0.03", "0.031"), covers("0", "0"), covers("10", "9.99")], [true, true, false, false, true]);
  const view = { status: "pending", network: "bitcoin", asset: "BTC", requestedAmount: "0.031", amountReceived: "0", amountPending: "0.031", requiredConfirmations: 2, pendingConfirmations: 1 };
  const seen = statusText(view as never);
  t.equal(seen.title, "Payment seen");
  t.match(seen.detail, /0\.031 BTC is on the network: 1 of 2 confirmations so far\. Do not send it again/, "with its progress");
  t.equal(seenNotice(view as never), undefined, "no second line saying the same");
  const part = { ...view, amountPending: "0.01" };
  t.equal(statusText(part as never).title, "Waiting for payment", "part of it seen: still waiting for the rest");
  t.match(seenNotice(part as never), /Payment seen: 0\.01 BTC/);
});

t.test("paid in full and waiting for confirmations: no countdown, address buttons or QR code invite a second payment", async (t) => {
  const seen = await renderCheckoutPage(view({ amountReceived: "0", amountPending: "12.5", pendingConfirmations: 3, requiredConfirmations: 12 }), false, now);
  t.match(seen, /<section class="pay" id="pay" aria-label="How to pay" hidden>/, "the instructions hidden (countdown, Copy, Open in wallet, QR)");
  t.match(seen, /data-seen="3"/, "the progress for the live refresh");
  t.match(text(seen), "3 of 12 confirmations so far");
  t.equal(checkoutStatus(view({ amountReceived: "0", amountPending: "12.5", pendingConfirmations: 3, requiredConfirmations: 12 })).pending_confirmations, 3);
  const part = await renderCheckoutPage(view({ amountReceived: "0", amountPending: "2.5", pendingConfirmations: 0 }), false, now);
  t.match(part, /<section class="pay" id="pay" aria-label="How to pay">/, "part of it seen: the instructions stay, for the rest");
});

t.test("a Test intent on a network no watcher follows: the page says so, and that the sandbox pays it", async (t) => {
  const unwatched = await renderCheckoutPage(view({ network: "solana", asset: "SOL", depositAddress: undefined, paymentUri: undefined, watched: false }), true, now);
  t.match(unwatched, '<p class="note note-warning" id="unwatched" role="note">');
  t.match(text(unwatched), "This server does not watch Solana devnet: a payment sent to this address is not seen. The sandbox simulator pays this test payment");
  t.match(unwatchedText, "{network}");
  t.notMatch(await renderCheckoutPage(view(), true, now), 'id="unwatched"', "watched: no notice");
  t.notMatch(await renderCheckoutPage(view({ watched: false }), false, now), 'id="unwatched"', "Live: nothing said to the shopper");
});

t.test("network names as a shopper knows them, the testnet named in Test", async (t) => {
  t.same(
    ["polygon", "base", "arbitrum"].map((n) => [networkLabel(n, false), networkLabel(n, true)]),
    [
      ["Polygon", "Polygon Amoy testnet"],
      ["Base", "Base Sepolia testnet"],
      ["Arbitrum One", "Arbitrum Sepolia testnet"],
    ],
  );
  t.equal(networkLabel("dogecoin", false), "dogecoin", "an unknown network by its name");
});
