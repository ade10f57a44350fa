/**
 * The dashboard's pages, rendered on the server from the API's own messages. No inline script
 * or style (the CSP forbids both): one stylesheet and one small script (assets.ts), and every
 * page works without the script. Every form posts with the session's CSRF token.
 */
import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import type { JsonValue } from "@bufbuild/protobuf";
import type { DashboardSession } from "../../gen/payments/v1/dashboard_pb.ts";
import type { PaymentIntent } from "../../gen/payments/v1/payment_intents_pb.ts";
import type { GoLiveReadiness } from "../../gen/payments/v1/readiness_pb.ts";
import type { CreatedWebhookEndpoint, WebhookEndpoint } from "../../gen/payments/v1/webhooks_pb.ts";
import { escapeHtml as e, htmlDocument, logoHtml } from "../checkout/page.ts";
import { allEvents, eventTypes, extensionEventTypes } from "../vocabulary/event-types.ts";
import { intentStatuses } from "../vocabulary/value-sets.ts";
import { assets, offeredIn } from "../vocabulary/assets.ts";
import { currencyCodes } from "../vocabulary/currencies.ts";
import { explorerUrl, type Explorers } from "../vocabulary/explorers.ts";
import { pill } from "./status.ts";
import { adviceList, stepSentence } from "./timeline.ts";

/** Where the pages and their two files are. */
export interface DashboardPaths {
  base: string;
  css: string;
  js: string;
}

/** The signed-in view every page is drawn for: who, where, what it may do, and the forms' CSRF token. */
export interface Viewer {
  session: DashboardSession;
  csrf: string;
}

export const can = (v: Viewer, scope: string) => v.session.scopes.includes(scope);

export function when(ts: Timestamp | undefined): string {
  return ts === undefined ? "—" : timestampDate(ts).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
}

/** A dashboard page: the checkout's document, with the dashboard's files and a skip link first. */
function document(o: { title: string; paths: DashboardPaths; body: string }): string {
  return htmlDocument({ title: `${o.title} — Dashboard`, paths: o.paths, script: true, body: `<a class="skip" href="#main">Skip to content</a>\n${o.body}` });
}

/** The sections, each shown only to a session whose scopes can read it. */
const navItems = [
  ["payments", "Payments", "payment_intents:read"],
  ["webhooks", "Webhooks", "webhooks:read"],
  ["readiness", "Go-live readiness", "merchant:readiness"],
  ["api-keys", "API keys", "api_keys:read"],
  ["settings", "Shop settings", "merchant:write"],
] as const;

/** A signed-in page: the header with the environment and merchant, the navigation, then `main`. */
export function layout(paths: DashboardPaths, v: Viewer, o: { title: string; section: string; main: string; notice?: string }): string {
  const s = v.session;
  const env = s.environment === "live" ? `<span class="env env-live">Live</span>` : `<span class="env env-test">Test mode</span>`;
  const nav = navItems
    .filter(([, , scope]) => s.scopes.includes(scope))
    .map(([path, label]) => `<li><a href="${e(`${paths.base}/${path}`)}"${o.section === path ? ` aria-current="page"` : ""}>${label}</a></li>`)
    .join("");
  // The shop's logo beside its name (an <img> sized by the stylesheet; the page's CSP names its origin).
  const who = `${logoHtml(s.merchantLogoUrl, "shop-logo")}${s.merchantName ? `<strong>${e(s.merchantName)}</strong> <code>${e(s.merchantId)}</code>` : `Merchant <code>${e(s.merchantId)}</code>`}`;
  return document({
    title: o.title,
    paths,
    body: `<header class="top">
<p class="who">${env} <span class="merchant">${who}</span>${s.readOnly ? ` <span class="badge">Read-only</span>` : ""}</p>
<nav aria-label="Sections"><ul class="nav">${nav}</ul></nav>
<form method="post" action="${e(`${paths.base}/sign-out`)}" class="sign-out">${csrfField(v.csrf)}<button type="submit" class="button button-secondary">Sign out</button></form>
</header>
<main id="main" tabindex="-1">
<h1>${e(o.title)}</h1>
${o.notice ?? ""}${o.main}
</main>`,
  });
}

export function csrfField(token: string): string {
  return `<input type="hidden" name="csrf" value="${e(token)}">`;
}

/** A form of one button that posts an action (with the CSRF token and, for idempotent calls, a key made when the page was drawn). */
export function actionForm(v: Viewer, action: string, label: string, o: { idem?: string; danger?: boolean; id?: string } = {}): string {
  return `<form method="post" action="${e(action)}" class="inline">${csrfField(v.csrf)}${o.idem ? `<input type="hidden" name="idem" value="${e(o.idem)}">` : ""}<button type="submit" class="button${o.danger ? " button-danger" : ""}"${o.id ? ` id="${e(o.id)}"` : ""}>${e(label)}</button></form>`;
}

export function notice(text: string, kind: "ok" | "error" | "warning" = "ok"): string {
  return `<p class="notice notice-${kind}" role="${kind === "error" ? "alert" : "status"}">${e(text)}</p>\n`;
}

/** A sign-in page: one secret field, posted with the pre-sign-in CSRF token. */
function secretFormPage(
  paths: DashboardPaths,
  csrf: string,
  o: { title: string; action: string; formId: string; fieldId: string; name: string; label: string; help: string; after?: string; message?: string; replacing?: SignedIn },
): string {
  // Signed in already: the form says so and is sent only by a click (the script does not send it).
  const replacing = o.replacing
    ? `${notice(`You are signed in to ${o.replacing.merchantId} (${o.replacing.environment === "live" ? "Live" : "Test"}). Signing in here ends that session.`)}`
    : "";
  return document({
    title: o.title,
    paths,
    body: `<main id="main" class="narrow" tabindex="-1">
<h1>${e(o.title)}</h1>
${o.message ? notice(o.message, "error") : ""}${replacing}<form method="post" action="${e(`${paths.base}/${o.action}`)}" class="stack" id="${o.formId}"${o.replacing ? ' data-confirm="replace"' : ""}>
${csrfField(csrf)}${o.replacing ? '\n<input type="hidden" name="replace" value="1">' : ""}
<label for="${o.fieldId}">${e(o.label)}</label>
<input id="${o.fieldId}" name="${o.name}" type="password" autocomplete="off" spellcheck="false" required maxlength="128" aria-describedby="${o.fieldId}-help">
<p id="${o.fieldId}-help" class="help">${e(o.help)}</p>
<button type="submit" class="button">${o.replacing ? "Sign out there and sign in here" : "Sign in"}</button>
</form>
${o.after ?? ""}</main>`,
  });
}

/** The session a browser already has when it opens a sign-in page. */
export interface SignedIn {
  merchantId: string;
  environment: string;
}

/** The sign-in page: an API key form (and where the one-time link goes). */
export function signInPage(paths: DashboardPaths, csrf: string, message?: string): string {
  return secretFormPage(paths, csrf, {
    title: "Sign in to the dashboard",
    action: "sign-in",
    formId: "sign-in-form",
    fieldId: "api-key",
    name: "api_key",
    label: "API key",
    help: "A secret key of your merchant (sk_test_… or sk_live_…). It is checked, then forgotten: the session remembers only which key it was.",
    after: `<p class="help">Were you given a sign-in link? Open it as it is.</p>\n`,
    message,
  });
}

/**
 * Where a one-time link lands (…/link#token=…): the token is in the fragment, which never reaches
 * a server; the page's script puts it into this form and sends it. Without JavaScript, paste the
 * part after "#token=" into the field. A browser signed in already is asked first: a link someone
 * sent would otherwise move it into their shop without a word.
 */
export function linkPage(paths: DashboardPaths, csrf: string, message?: string, replacing?: SignedIn): string {
  return secretFormPage(paths, csrf, {
    title: "Sign in with a link",
    action: "link",
    formId: "link-form",
    fieldId: "link-token",
    name: "token",
    label: "Sign-in link token",
    help: "Filled in from the link. Without JavaScript, paste the part of the link after “#token=”.",
    message,
    replacing,
  });
}

/** A page of its own for a refusal or failure: what went wrong in one line, and a way back. */
export function messagePage(paths: DashboardPaths, title: string, text: string, back?: string): string {
  return document({
    title,
    paths,
    body: `<main id="main" class="narrow" tabindex="-1">
<h1>${e(title)}</h1>
<p>${e(text)}</p>
<p><a href="${e(back ?? `${paths.base}/payments`)}">Back to the dashboard</a></p>
</main>`,
  });
}

const exceptionText: Readonly<Record<string, string>> = {
  underpaid: "underpaid",
  overpaid: "overpaid",
  late: "paid late",
  wrong_asset: "wrong asset",
  other_method: "other method",
  intent_cancelled: "paid after cancellation",
  after_late_window: "paid after the late window",
  reorged: "reorged",
};

export function exceptionBadge(reasons: readonly string[] | undefined): string {
  if (!reasons || reasons.length === 0) return "";
  return ` <span class="badge badge-exception">Exception: ${e(reasons.map((r) => exceptionText[r] ?? r).join(", "))}</span>`;
}

export interface PaymentFilters {
  status?: string;
  reference?: string;
  publicId?: string;
  search?: string;
  from?: string;
  to?: string;
}

export function paymentsPage(
  paths: DashboardPaths,
  v: Viewer,
  o: { intents: PaymentIntent[]; exceptions: Map<string, string[]>; filters: PaymentFilters; next?: string; notice?: string },
): string {
  const f = o.filters;
  const statusOptions = ["", ...intentStatuses].map((s) => `<option value="${s}"${f.status === s ? " selected" : ""}>${s === "" ? "Any" : s}</option>`).join("");
  const rows = o.intents
    .map(
      (pi) => `<tr>
<td data-label="Payment"><a href="${e(`${paths.base}/payments/${pi.publicId}`)}">${e(pi.publicId)}</a></td>
<td data-label="Reference">${e(pi.merchantReference ?? "—")}</td>
<td data-label="Status">${pill(pi.status)}${exceptionBadge(o.exceptions.get(pi.publicId))}${adviceList(o.exceptions.get(pi.publicId) ?? [], pi)}</td>
<td class="num" data-label="Amount">${pi.priceAmount !== undefined ? `${e(pi.priceAmount)} ${e(pi.priceCurrency ?? "")}<br><span class="help">${asked(pi)}</span>` : asked(pi)}</td>
<td data-label="Network">${e(pi.network ?? pi.paymentMethods.map((m) => m.network).filter((n, i, all) => all.indexOf(n) === i).join(", "))}</td>
<td data-label="Created">${when(pi.createdAt)}</td>
</tr>`,
    )
    .join("\n");
  const query = new URLSearchParams(Object.entries({ status: f.status, reference: f.reference, public_id: f.publicId, from: f.from, to: f.to }).filter((x): x is [string, string] => !!x[1]));
  const more = o.next ? `<p><a href="${e(`${paths.base}/payments?${query.toString() ? `${query}&` : ""}cursor=${encodeURIComponent(o.next)}`)}" rel="next">Next page</a></p>` : "";
  return layout(paths, v, {
    title: "Payments",
    section: "payments",
    notice: o.notice,
    main: `${paymentActions(paths, v, query)}<form method="get" action="${e(`${paths.base}/payments`)}" class="filters" role="search" aria-label="Find payments">
<div class="field"><label for="f-search">Deposit address or transaction hash</label><input id="f-search" name="search" value="${e(f.search ?? "")}" maxlength="128"></div>
<div class="field"><label for="f-reference">Merchant reference</label><input id="f-reference" name="reference" value="${e(f.reference ?? "")}" maxlength="128"></div>
<div class="field"><label for="f-id">Payment id</label><input id="f-id" name="public_id" value="${e(f.publicId ?? "")}" maxlength="64"></div>
<div class="field"><label for="f-status">Status</label><select id="f-status" name="status">${statusOptions}</select></div>
<div class="field"><label for="f-from">Created from</label><input id="f-from" name="from" type="date" value="${e(f.from ?? "")}"></div>
<div class="field"><label for="f-to">Created before</label><input id="f-to" name="to" type="date" value="${e(f.to ?? "")}"></div>
<div class="field"><button type="submit" class="button">Find</button></div>
</form>
${
  o.intents.length === 0
    ? `<p id="no-results">No payments found.</p>`
    : `<table id="payments" class="cards">
<caption class="visually-hidden">Payments, newest first</caption>
<thead><tr><th scope="col">Payment</th><th scope="col">Reference</th><th scope="col">Status</th><th scope="col">Amount</th><th scope="col">Network</th><th scope="col">Created</th></tr></thead>
<tbody>
${rows}
</tbody>
</table>`
}
${more}`,
  });
}

/**
 * New payment, and the CSV export of what the list's filters find (GET …/payment-intents/export
 * through the dashboard's own path: the browser has a session cookie, not an API key). The
 * search box is not an export filter: an export of a search is the export of its one payment id.
 */
function paymentActions(paths: DashboardPaths, v: Viewer, filters: URLSearchParams): string {
  const actions = [
    can(v, "payment_intents:write") ? `<a class="button" href="${e(`${paths.base}/payments/new`)}" id="new-payment">New payment</a>` : "",
    can(v, "payment_intents:read") ? `<a class="button" href="${e(`${paths.base}/payments/export${filters.size > 0 ? `?${filters}` : ""}`)}" id="export-csv" download>Export CSV</a>` : "",
  ].filter(Boolean);
  return actions.length === 0 ? "" : `<p class="actions">${actions.join(" ")}</p>\n`;
}

export function dl(items: [string, string][]): string {
  return `<dl class="facts">${items.map(([k, val]) => `<div><dt>${e(k)}</dt><dd>${val}</dd></div>`).join("")}</dl>`;
}

function json(value: JsonValue | undefined): string {
  return `<pre class="payload">${e(JSON.stringify(value ?? {}, null, 2))}</pre>`;
}

export interface TimelineEvent {
  id: string;
  type: string;
  createdAt: string;
  data: JsonValue;
}

/** What an intent asks: its amount and asset; or, offering several methods none of which is chosen yet, each one's ("12.5 USDC or 0.004 ETH"). */
function asked(pi: PaymentIntent, on?: string): string {
  if (pi.asset !== undefined) return `${e(pi.requestedAmount ?? "")} ${e(pi.asset)}`;
  return pi.paymentMethods.map((m) => `${e(m.requestedAmount)} ${e(m.asset)}${on ? `${on}${e(m.network)}` : ""}`).join(" or ");
}

/**
 * A transaction as people look it up: its hash, linked to the network's explorer (a simulated
 * one, the sandbox's, is said to be so instead); its output's index only when it is not the first.
 */
function transactionCell(pi: PaymentIntent, t: PaymentIntent["transactions"][number], explorers: Explorers | undefined): string {
  const hash = `<code class="hash">${e(t.txHash)}</code>`;
  const output = t.outputIndex > 0 ? ` <span class="help">output ${t.outputIndex}</span>` : "";
  if (t.simulated) return `${hash}${output} <span class="help">(simulated)</span>`;
  const url = explorers && explorerUrl(explorers, t.network || (pi.network ?? ""), pi.environment, t.txHash);
  return `${url ? `<a href="${e(url)}" rel="noreferrer noopener" target="_blank">${hash}</a>` : hash}${output}`;
}

export function intentPage(
  paths: DashboardPaths,
  v: Viewer,
  /** refunds: the Refunds section (refunds-page.ts), when the caller read them. */
  o: { intent: PaymentIntent; events: TimelineEvent[]; exceptions: string[]; idem: string; notice?: string; explorers?: Explorers; refunds?: string },
): string {
  const pi = o.intent;
  const cancel = can(v, "payment_intents:write") && pi.status === "pending" ? `<section aria-labelledby="actions-h"><h2 id="actions-h">Actions</h2>${actionForm(v, `${paths.base}/payments/${pi.publicId}/cancel`, "Cancel payment", { idem: o.idem, danger: true, id: "cancel" })}</section>` : "";
  const txs =
    pi.transactions.length === 0
      ? `<p>No transaction seen yet.</p>`
      : `<table id="transactions" class="cards"><thead><tr><th scope="col">Transaction</th><th scope="col">Amount</th><th scope="col">Confirmations</th><th scope="col">Counts</th></tr></thead><tbody>
${pi.transactions
  .map(
    (t) =>
      `<tr><td data-label="Transaction">${transactionCell(pi, t, o.explorers)}</td><td class="num" data-label="Amount">${e(t.amount)} ${e(t.asset)}</td><td class="num" data-label="Confirmations">${t.confirmations}</td><td data-label="Counts">${t.counted ? "Yes" : `No${t.reason ? ` — ${e(t.reason.replace(/_/g, " "))}` : ""}`}</td></tr>`,
  )
  .join("\n")}
</tbody></table>`;
  const timeline = o.events
    .map(
      (ev) => `<li class="step"><time datetime="${e(ev.createdAt)}">${e(ev.createdAt.replace("T", " ").replace(/\.\d+Z$/, " UTC"))}</time>
<p class="step-text">${e(stepSentence(ev.type, ev.data))}</p>
<details class="more"><summary>Raw event <code>${e(ev.type)}</code></summary>
<p><a href="${e(`${paths.base}/deliveries?event=${ev.id}`)}">Deliveries of ${e(ev.id)}</a></p>
${json(ev.data)}</details></li>`,
    )
    .join("\n");
  const amounts: [string, string][] = [
    ["Status", `${pill(pi.status, { id: "intent-status" })}${exceptionBadge(o.exceptions)}`],
    ...(o.exceptions.length ? ([["What to do", adviceList(o.exceptions, pi, "exception-advice")]] as [string, string][]) : []),
    ["Requested", pi.asset === undefined ? `${asked(pi, " on ")} <span class="help">(the shopper's choice: none made yet)</span>` : `${e(pi.requestedAmount ?? "")} ${e(pi.asset)} on ${e(pi.network ?? "")}`],
    ["Received", `${e(pi.amountReceived ?? "0")} ${e(pi.asset ?? "")}`],
    ...(pi.amountRefunded !== undefined ? ([["Refunded", `${e(pi.amountRefunded)} ${e(pi.asset ?? "")}`]] as [string, string][]) : []),
    ["Still due", pi.amountDue === undefined ? "—" : `${e(pi.amountDue)} ${e(pi.asset ?? "")}`],
    ...(pi.priceAmount !== undefined ? ([["Price", `${e(pi.priceAmount)} ${e(pi.priceCurrency ?? "")}${pi.quote ? ` at ${e(pi.quote.rate)} a unit` : ""}`]] as [string, string][]) : []),
    ["Reference", e(pi.merchantReference ?? "—")],
    ["Deposit address", pi.depositAddress ? `<code class="hash">${e(pi.depositAddress)}</code>` : "—"],
    // Several ways to pay: each with its amount and address, the chosen one marked.
    ...(pi.paymentMethods.length > 1
      ? ([
          [
            "Payment methods",
            `<ul class="methods" id="payment-methods">${pi.paymentMethods
              .map((m) => `<li>${e(m.requestedAmount)} ${e(m.asset)} on ${e(m.network)}${m.chosen ? " <strong>(chosen)</strong>" : ""}<br><code class="hash">${e(m.depositAddress)}</code></li>`)
              .join("")}</ul>`,
          ],
        ] as [string, string][])
      : []),
    ["Created", when(pi.createdAt)],
    ["Expires", when(pi.expiresAt)],
    ["Checkout page", `<a href="${e(pi.checkoutUrl)}" id="checkout-link">${e(pi.checkoutUrl)}</a> <button type="button" class="button button-secondary" data-copy="${e(pi.checkoutUrl)}" hidden>Copy link</button> <span role="status" aria-live="polite" class="copy-status"></span>`],
  ];
  return layout(paths, v, {
    title: `Payment ${pi.publicId}`,
    section: "payments",
    notice: o.notice,
    main: `${dl(amounts)}
${cancel}
<section aria-labelledby="tx-h"><h2 id="tx-h">Transactions</h2>${txs}</section>
${o.refunds ?? ""}
<section aria-labelledby="timeline-h"><h2 id="timeline-h">Timeline</h2>${o.events.length === 0 ? "<p>No events yet.</p>" : `<ol class="timeline" id="timeline">${timeline}</ol>`}</section>`,
  });
}

export const eventChoices = [allEvents, ...eventTypes, ...extensionEventTypes];

/** One checkbox of an endpoint form's event types, ticked when `chosen` has it; "*" says what it takes. */
export function eventChoice(type: string, i: number, chosen: readonly string[] = [allEvents]): string {
  const checked = chosen.includes(type) ? " checked" : "";
  if (type !== allEvents) return `<label class="check"><input type="checkbox" name="events" value="${e(type)}"${checked} id="ev-${i}"> ${e(type)}</label>`;
  return `<label class="check"><input type="checkbox" name="events" value="${e(type)}"${checked} id="ev-${i}" aria-describedby="ev-all-hint"> All (*)</label>
<p class="help" id="ev-all-hint">Every event type below, payment.exception (a payment that will not count, e.g. in another asset) included, and types added later. Or tick only the types your receiver handles.</p>`;
}

export function webhooksPage(paths: DashboardPaths, v: Viewer, o: { endpoints: WebhookEndpoint[]; idem: string; created?: CreatedWebhookEndpoint; notice?: string }): string {
  const rows = o.endpoints
    .map(
      (ep) =>
        `<tr><td data-label="URL"><a href="${e(`${paths.base}/webhooks/${ep.id}`)}" class="endpoint-link">${e(ep.url)}</a></td><td data-label="Description">${e(ep.description ?? "—")}</td><td data-label="Status">${pill(ep.status)}</td><td data-label="Events">${e(ep.enabledEvents.join(", "))}</td></tr>`,
    )
    .join("\n");
  const created = o.created
    ? `<section class="secret" aria-labelledby="secret-h" id="created">
<h2 id="secret-h">Endpoint created: its signing secret</h2>
<p>Copy it now: it is shown only this once. Your receiver checks each webhook's signature with it.</p>
<p><code class="hash" id="signing-secret">${e(o.created.signingSecret)}</code></p>
<p><button type="button" class="button" data-copy="${e(o.created.signingSecret)}" hidden>Copy secret</button> <span role="status" aria-live="polite" class="copy-status"></span></p>
<p><a href="${e(`${paths.base}/webhooks/${o.created.id}`)}">Open the endpoint</a></p>
</section>`
    : "";
  const create = can(v, "webhooks:write")
    ? `<section aria-labelledby="create-h"><h2 id="create-h">Add an endpoint</h2>
<form method="post" action="${e(`${paths.base}/webhooks`)}" class="stack" id="create-endpoint">
${csrfField(v.csrf)}<input type="hidden" name="idem" value="${e(o.idem)}">
<label for="ep-url">Endpoint URL</label><input id="ep-url" name="url" type="url" required maxlength="2048" placeholder="https://">
<label for="ep-description">Description (optional)</label><input id="ep-description" name="description" maxlength="256">
<fieldset><legend>Events to send</legend>
${eventChoices.map((type, i) => eventChoice(type, i)).join("\n")}
</fieldset>
<button type="submit" class="button">Add endpoint</button>
</form></section>`
    : "";
  return layout(paths, v, {
    title: "Webhooks",
    section: "webhooks",
    notice: o.notice,
    main: `${created}
<section aria-labelledby="endpoints-h"><h2 id="endpoints-h">Endpoints</h2>
${o.endpoints.length === 0 ? "<p>No endpoints yet.</p>" : `<table id="endpoints" class="cards"><thead><tr><th scope="col">URL</th><th scope="col">Description</th><th scope="col">Status</th><th scope="col">Events</th></tr></thead><tbody>\n${rows}\n</tbody></table>`}
<p><a href="${e(`${paths.base}/deliveries`)}">All deliveries</a></p>
</section>
${create}`,
  });
}

export function readinessPage(paths: DashboardPaths, v: Viewer, r: GoLiveReadiness): string {
  return layout(paths, v, {
    title: "Go-live readiness",
    section: "readiness",
    // Test is checked alone: "ready" there says nothing of Live, which has keys, endpoints and addresses of its own.
    main: `<p id="ready">${
      r.environment === "live"
        ? r.ready
          ? "Ready to go live."
          : "Not ready to go live yet: see what is left below."
        : r.ready
          ? "Test is set up. Live is checked on its own: sign in with a Live key to see what it still needs (a Live API key, an enabled Live webhook endpoint that has received its test event, and your wallet's deposit addresses)."
          : "Test is not set up yet: see what is left below. Live is checked on its own, with a Live key."
    }</p>
<ul class="checklist" id="checklist">
${r.checks.map((c) => `<li class="${c.passed ? "passed" : "failed"}"><span class="mark">${c.passed ? "Done" : c.severity === "required" ? "To do" : "Advice"}</span> <strong>${e(c.id.replace(/_/g, " "))}</strong>: ${e(c.message)}</li>`).join("\n")}
</ul>`,
  });
}

/** The network and asset pairs a payment can be taken in, as "network:asset", in an environment (polygon's USDT is Live only). */
const pairsIn = (environment: string) => assets.filter((a) => offeredIn(a, environment === "live" ? "live" : "test")).map((a) => `${a.network}:${a.asset}`);

/**
 * A new payment from the dashboard: an amount in the asset or in a currency (then quoted at
 * create), the network and asset, a reference; created through the API's own create, so its rules
 * and limits are the API's. Its page then shows the checkout link to send the shopper.
 */
export function newPaymentPage(paths: DashboardPaths, v: Viewer, o: { idem: string; message?: string; values?: { pair?: string; amount?: string; currency?: string; reference?: string } }): string {
  const f = o.values ?? {};
  const pairOptions = pairsIn(v.session.environment).map((p) => `<option value="${e(p)}"${f.pair === p ? " selected" : ""}>${e(p.replace(":", " · "))}</option>`).join("");
  const currencyOptions = [["", "the asset itself"], ...currencyCodes.map((c) => [c, c])]
    .map(([value, label]) => `<option value="${e(value as string)}"${(f.currency ?? "") === value ? " selected" : ""}>${e(label as string)}</option>`)
    .join("");
  return layout(paths, v, {
    title: "New payment",
    section: "payments",
    notice: o.message ? notice(o.message, "error") : undefined,
    main: `<form method="post" action="${e(`${paths.base}/payments/new`)}" class="stack" id="new-payment-form">
${csrfField(v.csrf)}<input type="hidden" name="idem" value="${e(o.idem)}">
<label for="np-amount">Amount</label><input id="np-amount" name="amount" required maxlength="60" inputmode="decimal" value="${e(f.amount ?? "")}" aria-describedby="np-amount-help">
<label for="np-currency">Priced in</label><select id="np-currency" name="currency">${currencyOptions}</select>
<p class="help" id="np-amount-help">In a currency, the amount to pay is quoted at the exchange rate when the payment is created.</p>
<label for="np-pair">Paid with (network · asset)</label><select id="np-pair" name="pair">${pairOptions}</select>
<label for="np-reference">Your reference (optional)</label><input id="np-reference" name="reference" maxlength="128" value="${e(f.reference ?? "")}">
<button type="submit" class="button">Create payment</button>
</form>`,
  });
}
