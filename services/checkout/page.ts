/**
 * The hosted checkout page, rendered on the server from the shopper view of an
 * intent (nothing else reaches it). No inline script or style: the page's CSS
 * and JS are separate files (assets.ts), so the Content-Security-Policy can
 * forbid inline code. Everything but the live refresh works without JavaScript.
 */
import { brandColorProblem, logoOrigin } from "../vocabulary/shop-look.ts";
import { brandStylesheetName } from "./brand-style.ts";
import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import QRCode from "qrcode";
import type { ShopperPaymentIntent } from "../../gen/payments/v1/shopper_pb.ts";
import { paymentUri } from "../addresses/payment-uri.ts";
import { amountDue, payableStatuses } from "../intents/funds.ts";
import { fromUnits, toUnits } from "../vocabulary/amount.ts";
import { findAsset } from "../vocabulary/assets.ts";

/**
 * The shopper view as the page reads it: the chosen method's fields "" where the view leaves them
 * unset (several methods offered, none chosen), which only the picker is drawn from, and it shows none
 * of them (shownMethod).
 */
export type PageView = Omit<ShopperPaymentIntent, "network" | "asset" | "requestedAmount"> & { network: string; asset: string; requestedAmount: string };

function pageView(view: ShopperPaymentIntent): PageView {
  return { ...view, network: view.network ?? "", asset: view.asset ?? "", requestedAmount: view.requestedAmount ?? "" };
}

/** The statuses after which nothing changes for the shopper: the page stops refreshing. */
export const finalStatuses: readonly string[] = ["confirmed", "overpaid", "late", "expired", "cancelled"];

/**
 * What the page says for each status: a title and a detail line. The detail's
 * {requested}, {due}, {received} and {asset} are filled in with the intent's
 * amounts. The page's JS gets this same table (assets.ts), so both say the same.
 */
export const statusTexts: Readonly<Record<string, { title: string; detail: string }>> = {
  pending: { title: "Waiting for payment", detail: "Send exactly {requested} {asset} to the address below." },
  underpaid: { title: "Partly paid", detail: "Amount still due: {due} {asset}. Send it to the same address." },
  confirmed: { title: "Paid", detail: "Thank you, your payment is complete. You can close this page." },
  overpaid: { title: "Paid (more than requested)", detail: "We received {received} {asset}. The merchant will be in touch about the difference." },
  late: { title: "Paid after expiry — the merchant will be in touch", detail: "We received {received} {asset} after this payment had expired." },
  expired: { title: "Expired", detail: "This payment has expired. Do not send funds to this address; ask the shop for a new payment link." },
  cancelled: { title: "Cancelled", detail: "This payment was cancelled. Do not send funds to this address." },
};

/**
 * What the page says instead of pending's or underpaid's text while what is seen on the chain,
 * not counting yet, covers what is due: the shopper must not be asked to send it again. Its
 * {pending} and {confirmations} are filled in too. The page's JS gets it as well (assets.ts).
 */
export const seenStatusText = {
  title: "Payment seen",
  detail: "Your payment of {pending} {asset} is on the network: {seen} of {confirmations} confirmations so far. Do not send it again; you can keep this page open.",
};

/** Whether the amount seen but not counting covers what is due (decimal strings of one asset). */
export function covers(pending: string, due: string): boolean {
  const [pi = "0", pf = ""] = pending.split(".");
  const [di = "0", df = ""] = due.split(".");
  const places = Math.max(pf.length, df.length);
  const units = (i: string, f: string) => BigInt(i + f.padEnd(places, "0"));
  return units(pi, pf) > 0n && units(pi, pf) >= units(di, df);
}

/**
 * The way back to the shop the page offers in each status, when the merchant gave that URL at
 * creation: its redirect_url once paid, its cancel_url while nothing is paid yet or any more due.
 * None while underpaid: the shopper still owes the rest, and leaving would not undo what was sent.
 * The label's {host} is the URL's host: the page names no merchant, and the shopper sees where the
 * link goes. The page's JS gets this same table (assets.ts).
 */
export const returnLinks: Readonly<Record<string, { link: "redirect" | "cancel"; label: string }>> = {
  pending: { link: "cancel", label: "Cancel and return to {host}" },
  confirmed: { link: "redirect", label: "Back to {host}" },
  overpaid: { link: "redirect", label: "Back to {host}" },
  late: { link: "redirect", label: "Back to {host}" },
  expired: { link: "cancel", label: "Back to {host}" },
  cancelled: { link: "cancel", label: "Back to {host}" },
};

/** The links back to the shop, both rendered (the script shows the one the status calls for). */
function returnLinksHtml(view: PageView): string {
  const urls = { redirect: view.redirectUrl, cancel: view.cancelUrl };
  const shown = returnLinks[view.status];
  const links = (["redirect", "cancel"] as const).flatMap((kind) => {
    const url = urls[kind];
    if (url === undefined) return [];
    const host = new URL(url).host;
    const label = (shown?.link === kind ? shown.label : kind === "redirect" ? "Back to {host}" : "Cancel and return to {host}").replace("{host}", host);
    const hidden = shown?.link === kind ? "" : " hidden";
    return [`<a class="button button-secondary" id="return-${kind}" href="${escapeHtml(url)}" data-host="${escapeHtml(host)}"${hidden}>${escapeHtml(label)}</a>`];
  });
  return links.length === 0 ? "" : `<nav class="return" aria-label="Back to the shop">\n${links.join("\n")}\n</nav>\n`;
}

const networkNames: Readonly<Record<string, { live: string; test: string }>> = {
  bitcoin: { live: "Bitcoin", test: "Bitcoin testnet" },
  ethereum: { live: "Ethereum", test: "Ethereum Sepolia testnet" },
  polygon: { live: "Polygon", test: "Polygon Amoy testnet" },
  base: { live: "Base", test: "Base Sepolia testnet" },
  arbitrum: { live: "Arbitrum One", test: "Arbitrum Sepolia testnet" },
  tron: { live: "Tron", test: "Tron Nile testnet" },
  solana: { live: "Solana", test: "Solana devnet" },
};

const htmlEscapes: Readonly<Record<string, string>> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

/** Text made safe for HTML element content and (quoted) attribute values. */
export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (c) => htmlEscapes[c] ?? c);
}

/** The network as a shopper knows it, naming the test network in test mode. */
export function networkLabel(network: string, testMode: boolean): string {
  const names = networkNames[network];
  return names ? names[testMode ? "test" : "live"] : network;
}


/** The status's title and detail, with the amounts filled in (plain text: escape before putting it in HTML). */
export function statusText(view: PageView): { title: string; detail: string } {
  const due = amountDue(view);
  const seen = payableStatuses.includes(view.status) && covers(view.amountPending ?? "0", due);
  const text = (seen ? seenStatusText : statusTexts[view.status]) ?? { title: view.status, detail: "" };
  const values: Record<string, string> = {
    requested: view.requestedAmount,
    due,
    received: view.amountReceived ?? "0",
    pending: view.amountPending ?? "0",
    confirmations: String(view.requiredConfirmations),
    seen: String(view.pendingConfirmations ?? 0),
    asset: view.asset,
  };
  return { title: text.title, detail: text.detail.replace(/\{(\w+)\}/g, (m, name: string) => values[name] ?? m) };
}

function iso(ts: Timestamp | undefined): string | null {
  return ts === undefined ? null : timestampDate(ts).toISOString();
}

/**
 * What the page says once a fiat-priced intent's quote has lapsed and no new one has replaced it
 * yet (the requote sweep makes one within a second, or once a rate is fresh again). The page's JS
 * gets it as well (assets.ts).
 */
export const quoteLapsedText = "Updating the rate: the amount to pay may change in a moment. A payment you already sent counts at the rate it was sent at.";

/** Whether the intent's quote has lapsed before the intent itself, as of `now`: it is being replaced. */
export function quoteLapsed(view: Pick<ShopperPaymentIntent, "quote" | "expiresAt" | "status">, now: Date): boolean {
  const lapses = view.quote?.expiresAt && timestampDate(view.quote.expiresAt).getTime();
  const expires = view.expiresAt && timestampDate(view.expiresAt).getTime();
  return payableStatuses.includes(view.status) && typeof lapses === "number" && typeof expires === "number" && lapses < expires && lapses <= now.getTime();
}

/** The status JSON the page polls: shopper-safe, these keys and nothing else. */
export interface CheckoutStatus {
  status: string;
  amount_received: string | null;
  /** Funds seen on the chain (in the mempool, or short of their confirmations) that do not count yet; null until a transaction is seen. */
  amount_pending: string | null;
  /** The confirmations a payment needs to count. */
  required_confirmations: number;
  /** The confirmations so far of what is pending (the fewest); null while nothing is. */
  pending_confirmations: number | null;
  amount_due: string;
  expires_at: string | null;
  /** Other assets received at the address, which do not count. */
  other_assets_received: string[];
  /** A fiat-priced intent's amount in its asset: it changes when a lapsed quote is replaced. Absent on other intents. */
  requested_amount?: string;
  /** A fiat-priced intent's current quote: its rate and until when it holds. Absent on other intents. */
  quote?: { rate: string; expires_at: string | null };
  /** An intent offering several methods: the one a payment chose ("base.USDC"), null until then. Absent on other intents. */
  method?: string | null;
}

/**
 * What the page says while a payment is seen on the chain but does not count yet (in the
 * mempool, or short of its confirmations): {pending}, {asset} and {confirmations} filled in.
 */
export const seenText = "Payment seen: {pending} {asset}, waiting for {confirmations} confirmation(s) on the network. You can keep this page open.";

/** The seen-payment line's text, or undefined when nothing is waiting (or the intent is no longer payable). */
export function seenNotice(
  view: Pick<PageView, "status" | "network" | "asset" | "requestedAmount" | "amountReceived" | "amountPending" | "requiredConfirmations">,
): string | undefined {
  const pending = view.amountPending;
  if (!payableStatuses.includes(view.status) || pending === undefined || /^0(\.0*)?$/.test(pending)) return undefined;
  // What covers the amount due is said by the status box itself.
  if (covers(pending, amountDue(view))) return undefined;
  return seenText.replace("{pending}", pending).replace("{asset}", view.asset).replace("{confirmations}", String(view.requiredConfirmations));
}

/**
 * What a Test page says when no watcher of the server follows its network ({network} filled in):
 * a payment sent there is never seen, and the sandbox simulator is what pays it. A Live intent is
 * not created there (network_not_watched); one whose watcher stopped later says nothing of it to
 * the shopper, whose payment is seen once a watcher follows again.
 */
export const unwatchedText =
  "This server does not watch {network}: a payment sent to this address is not seen. The sandbox simulator pays this test payment (the merchant runs it with a Test API key).";

/** What the page says when another asset reached the address: {other} and {asset} filled in. */
export const otherAssetText = "We also received {other} at this address, which this payment does not take: it does not count toward the {asset} due. Contact the merchant to sort it out.";

function otherAssetNotice(view: PageView): string {
  const text = otherAssetText.replace("{other}", view.otherAssetsReceived.join(", ")).replace("{asset}", view.asset);
  return `<p class="note note-warning" id="other-assets" role="alert"${view.otherAssetsReceived.length === 0 ? " hidden" : ""}>${escapeHtml(text)}</p>\n`;
}

export function checkoutStatus(view: PageView): CheckoutStatus {
  return {
    status: view.status,
    amount_received: view.amountReceived ?? null,
    amount_pending: view.amountPending ?? null,
    required_confirmations: view.requiredConfirmations,
    pending_confirmations: view.pendingConfirmations ?? null,
    amount_due: amountDue(view),
    expires_at: iso(view.expiresAt),
    other_assets_received: [...view.otherAssetsReceived],
    ...(view.quote ? { requested_amount: view.requestedAmount, quote: { rate: view.quote.rate, expires_at: iso(view.quote.expiresAt) } } : {}),
    ...(view.paymentMethods.length > 1 ? { method: chosenKey(view) } : {}),
  };
}

/** A method's key in the page's URL (?method=base.USDC) and its status JSON. */
export const methodKey = (m: { network: string; asset: string }): string => `${m.network}.${m.asset}`;

/** The chosen method's key on an intent offering several; null while none is chosen. */
function chosenKey(view: PageView): string | null {
  const chosen = view.paymentMethods.find((m) => m.chosen);
  return chosen ? methodKey(chosen) : null;
}

/** A method as people name it: "Bitcoin" for the coin on its own chain, else "USDC on Base" (the test network named in Test). */
export function methodLabel(m: { network: string; asset: string }, testMode: boolean): string {
  if (m.network === "bitcoin" && m.asset === "BTC") return testMode ? "Bitcoin (testnet)" : "Bitcoin";
  return `${m.asset} on ${networkLabel(m.network, testMode)}`;
}

/**
 * What the page shows of an intent offering several methods, none chosen yet: the picker ("pick"),
 * or the method the shopper picked (?method=…) as if it were the intent's own ("picked"). Once a
 * payment chose one, or with one method, the intent as it is ("one"), whatever was picked.
 */
export function shownMethod(shopper: ShopperPaymentIntent, picked: string | null): { mode: "one" | "pick" | "picked"; view: PageView } {
  const view = pageView(shopper);
  if (view.paymentMethods.length <= 1 || view.paymentMethods.some((m) => m.chosen)) return { mode: "one", view };
  const m = view.paymentMethods.find((x) => methodKey(x) === picked);
  if (!m) return { mode: "pick", view };
  return {
    mode: "picked",
    view: {
      ...view,
      network: m.network,
      asset: m.asset,
      requestedAmount: m.requestedAmount,
      depositAddress: m.depositAddress,
      paymentUri: m.paymentUri,
      quote: m.quote,
      requiredConfirmations: m.requiredConfirmations,
    },
  };
}

/** Remaining time as "m:ss" or "h:mm:ss"; "0:00" once past. */
export function formatRemaining(ms: number): string {
  const total = Math.max(0, Math.floor(ms / 1000));
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = total % 60;
  const ss = String(s).padStart(2, "0");
  return h > 0 ? `${h}:${String(m).padStart(2, "0")}:${ss}` : `${m}:${ss}`;
}

/** The QR code of a payment URI as an inline SVG image with an accessible name. */
export async function qrSvg(paymentUri: string, label: string): Promise<string> {
  const svg = await QRCode.toString(paymentUri, { type: "svg", errorCorrectionLevel: "M", margin: 2 });
  const id = "qr-title";
  return svg
    .trim()
    .replace(/^<svg /, `<svg class="qr-code" role="img" aria-labelledby="${id}" focusable="false" `)
    .replace(/>/, `><title id="${id}">${escapeHtml(label)}</title>`);
}

/**
 * What to pay now, and the URI a wallet opens for it: the intent's payment_uri while nothing
 * has arrived; once underpaid, the same kind of URI for the amount still due, so scanning the
 * QR code again does not ask for the whole amount a second time.
 */
export function toPay(view: PageView, testMode: boolean): { amount: string; uri: string | undefined } {
  if (view.status !== "underpaid" || !view.depositAddress || !view.paymentUri) return { amount: view.requestedAmount, uri: view.paymentUri };
  const due = amountDue(view);
  try {
    const uri = paymentUri({ network: view.network, asset: view.asset, environment: testMode ? "test" : "live", address: view.depositAddress, amount: due });
    return { amount: due, uri };
  } catch {
    // Nothing due (or nothing a URI can say): the address and the text still tell the shopper.
    return { amount: due, uri: undefined };
  }
}

/**
 * Where the page and its files are: the checkout path ("/checkout", or "" at the root), and the
 * stylesheet's and script's URLs (default: under base/assets/, unversioned).
 */
export interface PagePaths {
  base: string;
  css?: string;
  js?: string;
}

const defaultPaths: PagePaths = { base: "/checkout" };

/** A whole page: the head with its stylesheet (and script), then `body`. The dashboard's pages use it too. */
export function htmlDocument(o: { title: string; paths: PagePaths; body: string; script: boolean; styles?: readonly string[] }): string {
  const css = o.paths.css ?? `${o.paths.base}/assets/checkout.css`;
  const js = o.paths.js ?? `${o.paths.base}/assets/checkout.js`;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<meta name="robots" content="noindex, nofollow">
<title>${escapeHtml(o.title)}</title>
<link rel="stylesheet" href="${escapeHtml(css)}">
${(o.styles ?? []).map((href) => `<link rel="stylesheet" href="${escapeHtml(href)}">\n`).join("")}${o.script ? `<script src="${escapeHtml(js)}" defer></script>\n` : ""}</head>
<body>
${o.body}
</body>
</html>
`;
}

/** The checkout page of one intent, as of `now`. */
/**
 * The shop's logo as pages show it: an <img> (an SVG in one runs no script), sized by the
 * stylesheet, loaded without a referrer; alt="" as the name is beside it. "" without a usable logo.
 */
export function logoHtml(logoUrl: string | undefined, className: string): string {
  if (logoOrigin(logoUrl) === undefined) return "";
  return `<img class="${className}" src="${escapeHtml(logoUrl as string)}" alt="" referrerpolicy="no-referrer" decoding="async">`;
}

export async function renderCheckoutPage(
  shopper: ShopperPaymentIntent,
  testMode: boolean,
  now: Date,
  paths: PagePaths = defaultPaths,
  merchantName = "",
  look: { logoUrl?: string; brandColor?: string } = {},
  picked: string | null = null,
): Promise<string> {
  const shown = shownMethod(shopper, picked);
  if (shown.mode === "pick") return renderMethodPicker(shown.view, testMode, now, paths, merchantName, look);
  const view = shown.view;
  const e = escapeHtml;
  const status = checkoutStatus(view);
  const text = statusText(view);
  const payable = payableStatuses.includes(view.status);
  // Paid in full, waiting for confirmations: nothing more to send, so no countdown, address
  // buttons or QR code to invite a second payment (the status box shows the progress).
  const seenInFull = payable && covers(view.amountPending ?? "0", amountDue(view));
  const network = networkLabel(view.network, testMode);
  const plainPath = `${paths.base}/${view.publicId}`;
  // A picked method's page, and its status, carry the pick; the way back to the picker does not.
  const query = shown.mode === "picked" ? `?method=${encodeURIComponent(methodKey(view))}` : "";
  const pagePath = `${plainPath}${query}`;
  const expiresAt = status.expires_at;
  const remaining = expiresAt === null ? "" : formatRemaining(Date.parse(expiresAt) - now.getTime());
  const pay = toPay(view, testMode);
  const changeMethod =
    shown.mode === "picked"
      ? `<p class="change-method"><a href="${e(plainPath)}" id="change-method">Pay another way</a></p>
`
      : "";
  const qr = pay.uri ? await qrSvg(pay.uri, `QR code to pay ${pay.amount} ${view.asset} on ${network}`) : "";

  const banner = testMode
    ? `<p class="banner" role="note"><strong>Test mode</strong> — this is a test payment. Send only ${e(network)} funds; nothing real is charged.</p>\n`
    : "";
  // A Test intent on a network no watcher follows: only the sandbox pays it.
  const unwatched = testMode && !view.watched ? `<p class="note note-warning" id="unwatched" role="note">${e(unwatchedText.replace("{network}", network))}</p>\n` : "";

  const address = view.depositAddress
    ? `<div class="field">
  <h2 class="label" id="address-label">Deposit address</h2>
  <code class="address" id="address">${e(view.depositAddress)}</code>
  <div class="actions">
    <button type="button" class="button" id="copy" data-copy="${e(view.depositAddress)}" hidden>Copy address</button>
    ${pay.uri ? `<a class="button button-secondary" id="wallet" href="${e(pay.uri)}">Open in wallet app</a>` : ""}
  </div>
  <p class="copy-status" id="copy-status" role="status" aria-live="polite"></p>
</div>`
    : "";

  // A fiat-priced intent: its price beside the crypto amount, and how long its rate holds (its
  // quote's own expiry, at most the intent's: then what is due is quoted again, and the amount follows).
  const price = view.priceAmount !== undefined && view.priceCurrency !== undefined ? `<p class="price" id="price">${e(view.priceAmount)} ${e(view.priceCurrency)}</p>\n` : "";
  const quoteExpiresAt = status.quote?.expires_at ?? expiresAt;
  const lapsed = quoteLapsed(view, now);
  const quote =
    view.quote && view.priceCurrency !== undefined && quoteExpiresAt !== null
      ? `<p class="quote" id="quote">Rate 1 ${e(view.asset)} = <span id="quote-rate">${e(view.quote.rate)}</span> ${e(view.priceCurrency)}, held for <time id="quote-countdown" datetime="${e(quoteExpiresAt)}">${e(formatRemaining(Date.parse(quoteExpiresAt) - now.getTime()))}</time></p>
<p class="note" id="quote-lapsed" role="status" aria-live="polite"${lapsed ? "" : " hidden"}>${e(quoteLapsedText)}</p>\n`
      : "";

  // Phone first: the time left, the address and its buttons, then the QR code for paying from another device.
  const instructions = `<section class="pay" id="pay" aria-label="How to pay"${payable && !seenInFull ? "" : " hidden"}>
${expiresAt === null ? "" : `<p class="countdown">Time left to pay <time id="countdown" datetime="${e(expiresAt)}">${e(remaining)}</time></p>`}
${quote}
${address}
${qr ? `<figure class="qr" id="qr" data-amount="${e(pay.amount)}">\n${qr}\n<figcaption>Scan with your wallet app</figcaption>\n</figure>` : ""}
</section>`;

  const body = `${banner}<main class="card" id="checkout" data-status="${e(view.status)}" data-status-url="${e(`${plainPath}/status.json${query}`)}" data-page-url="${e(pagePath)}"
  data-expires-at="${e(expiresAt ?? "")}" data-requested="${e(view.requestedAmount)}" data-asset="${e(view.asset)}"
  data-received="${e(status.amount_received ?? "0")}" data-due="${e(status.amount_due)}" data-now="${e(now.toISOString())}"
  data-pending="${e(status.amount_pending ?? "0")}" data-confirmations="${status.required_confirmations}" data-seen="${status.pending_confirmations ?? 0}"${status.quote ? ` data-quote-expires-at="${e(status.quote.expires_at ?? "")}"` : ""}${status.method !== undefined ? ` data-method="${e(status.method ?? "")}"` : ""}>
<header class="head">
  ${logoHtml(look.logoUrl, "logo")}<h1 class="title">${merchantName ? `Pay ${e(merchantName)}` : "Payment"}</h1>
  <p class="amount"><span class="amount-value" id="amount">${e(view.requestedAmount)}</span> <span class="amount-asset" id="asset">${e(view.asset)}</span></p>
${price}  <p class="network">on <span id="network">${e(network)}</span></p>
${changeMethod}</header>
${unwatched}<section class="status" id="status" data-status="${e(view.status)}" role="status" aria-live="polite" aria-atomic="true">
  <p class="status-title" id="status-title">${e(text.title)}</p>
  <p class="status-detail" id="status-detail">${e(text.detail)}</p>
</section>
${otherAssetNotice(view)}<p class="note note-seen" id="seen" role="status" aria-live="polite"${seenNotice(view) === undefined ? " hidden" : ""}>${e(seenNotice(view) ?? "")}</p>
${instructions}
${returnLinksHtml(view)}<noscript><p class="note">This page does not update by itself without JavaScript: <a href="${e(pagePath)}">reload it</a> to see the latest status.</p></noscript>
<footer class="foot">Payment reference <span class="ref">${e(view.publicId)}</span></footer>
</main>`;
  // The brand colour comes in a stylesheet of its own (brand-style.ts): no inline style, no CSP change.
  const styles = look.brandColor && brandColorProblem(look.brandColor) === undefined ? [`${paths.base}/assets/${brandStylesheetName(look.brandColor)}`] : [];
  return htmlDocument({ title: `${text.title} — ${view.requestedAmount} ${view.asset}${merchantName ? ` to ${merchantName}` : ""}`, paths, body, script: true, styles });
}

/**
 * The page of an intent offering several methods before the shopper picked one: the price, the
 * time left, and one link per method (its name and amount) to that method's page. Links, not a
 * form: it works without JavaScript, and the page's CSP allows no form anyway. The script only
 * reloads it once a payment chose a method (status JSON `method`).
 */
async function renderMethodPicker(view: PageView, testMode: boolean, now: Date, paths: PagePaths, merchantName: string, look: { logoUrl?: string; brandColor?: string }): Promise<string> {
  const e = escapeHtml;
  const status = checkoutStatus(view);
  const pagePath = `${paths.base}/${view.publicId}`;
  const expiresAt = status.expires_at;
  const payable = payableStatuses.includes(view.status);
  const text = statusTexts[view.status] ?? { title: view.status, detail: "" };
  const detail = payable ? "Pick the coin and network you will pay with. You can change your pick until a payment is seen." : text.detail;
  const price = view.priceAmount !== undefined && view.priceCurrency !== undefined ? `${e(view.priceAmount)} ${e(view.priceCurrency)}` : "";
  const items = view.paymentMethods
    .map((m) => {
      const label = methodLabel(m, testMode);
      return `<li><a class="button method" href="${e(`${pagePath}?method=${encodeURIComponent(methodKey(m))}`)}" data-method="${e(methodKey(m))}"><span class="method-name">${e(label)}</span> <span class="method-amount">${e(m.requestedAmount)} ${e(m.asset)}</span></a></li>`;
    })
    .join("\n");
  const banner = testMode ? `<p class="banner" role="note"><strong>Test mode</strong> — this is a test payment; nothing real is charged.</p>\n` : "";
  const body = `${banner}<main class="card" id="checkout" data-status="${e(view.status)}" data-status-url="${e(`${pagePath}/status.json`)}" data-page-url="${e(pagePath)}"
  data-expires-at="${e(expiresAt ?? "")}" data-requested="" data-asset="" data-received="0" data-due="0" data-now="${e(now.toISOString())}" data-pending="0" data-confirmations="0" data-seen="0" data-method="" data-picker>
<header class="head">
  ${logoHtml(look.logoUrl, "logo")}<h1 class="title">${merchantName ? `Pay ${e(merchantName)}` : "Payment"}</h1>
${price ? `  <p class="amount"><span class="amount-value" id="price">${price}</span></p>\n` : ""}</header>
<section class="status" id="status" data-status="${e(view.status)}" role="status" aria-live="polite" aria-atomic="true">
  <p class="status-title" id="status-title">${e(payable ? "Choose how to pay" : text.title)}</p>
  <p class="status-detail" id="status-detail">${e(detail)}</p>
</section>
${
  payable
    ? `<nav class="methods" aria-labelledby="methods-h" id="methods">
<h2 class="label" id="methods-h">Ways to pay</h2>
<ul class="method-list">
${items}
</ul>
${expiresAt === null ? "" : `<p class="countdown">Time left to pay <time id="countdown" datetime="${e(expiresAt)}">${e(formatRemaining(Date.parse(expiresAt) - now.getTime()))}</time></p>`}
</nav>\n`
    : ""
}${returnLinksHtml(view)}<footer class="foot">Payment reference <span class="ref">${e(view.publicId)}</span></footer>
</main>`;
  const styles = look.brandColor && brandColorProblem(look.brandColor) === undefined ? [`${paths.base}/assets/${brandStylesheetName(look.brandColor)}`] : [];
  return htmlDocument({ title: `${payable ? "Choose how to pay" : text.title}${price ? ` — ${price}` : ""}${merchantName ? ` to ${merchantName}` : ""}`, paths, body, script: true, styles });
}

/** The page for an unknown or malformed id, and for any other path under the checkout path. */
export function renderNotFoundPage(paths: PagePaths = defaultPaths): string {
  return htmlDocument({
    title: "Payment not found",
    paths,
    script: false,
    body: `<main class="card">
<h1 class="title">Payment not found</h1>
<p>This payment link is not valid. Check the link you were given, or ask the shop for a new one.</p>
</main>`,
  });
}

const errorPages = {
  internal: { title: "Something went wrong", text: "This page cannot be shown right now. Please try again in a moment." },
  unavailable: { title: "Temporarily unavailable", text: "This page cannot be shown right now. Please try again in a moment." },
  method_not_allowed: { title: "Method not allowed", text: "This page can only be viewed." },
  rate_limited: { title: "Too many requests", text: "Too many requests came from your network. Please try again in a minute." },
} as const;

/** The page for a failure of ours (it says nothing about what failed), or for a method other than GET/HEAD. */
export function renderErrorPage(kind: keyof typeof errorPages, paths: PagePaths = defaultPaths): string {
  const page = errorPages[kind];
  return htmlDocument({
    title: page.title,
    paths,
    script: false,
    body: `<main class="card">
<h1 class="title">${page.title}</h1>
<p>${page.text}</p>
</main>`,
  });
}
