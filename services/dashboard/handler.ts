/**
 * Serves the merchant dashboard beside the API, under the path of DASHBOARD_BASE_URL. It holds
 * no data of its own: each page and action is a call of the API's RPCs (DashboardService for
 * what the API has no route for) made with the browser's session token, so scopes, limits,
 * idempotency and merchant scoping are the API's own.
 */
import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import type http from "node:http";
import { Code, ConnectError, createClient, createContextValues, type Transport } from "@connectrpc/connect";
import { toJson, type JsonValue } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { PageHandler } from "../../gateway/server.ts";
import { DashboardService, IntentEventSchema, type DashboardSession } from "../../gen/payments/v1/dashboard_pb.ts";
import { IntentService, type PaymentIntent } from "../../gen/payments/v1/payment_intents_pb.ts";
import { ReadinessService } from "../../gen/payments/v1/readiness_pb.ts";
import { WebhookService } from "../../gen/payments/v1/webhooks_pb.ts";
import { ApiKeyService } from "../../gen/payments/v1/api_keys_pb.ts";
import { RefundService } from "../../gen/payments/v1/refunds_pb.ts";
import { refundPage, refundsSection } from "./refunds-page.ts";
import { commonHeaders, pagesPathOf, send, sendAsset } from "../checkout/handler.ts";
import { dashboardCallHeader, dashboardCallKey, dashboardCallProof } from "../auth/dashboard-sessions.ts";
import { isDashboardSessionToken } from "../auth/keys.ts";
import { clientAddressKey, limitKeyOf } from "../platform/client-address.ts";
import { describeError } from "../platform/errors.ts";
import { randomBase62 } from "../platform/ids.ts";
import type { Logger } from "../platform/logger.ts";
import type { Limiter } from "../platform/rate-limit.ts";
import { dashboardAssets, dashboardAssetUrls } from "./assets.ts";
import * as pages from "./page.ts";
import { apiKeysPage, revokeKeyPage } from "./api-keys-page.ts";
import { settingsPage, valuesOf } from "./settings-page.ts";
import { MerchantService } from "../../gen/payments/v1/merchants_pb.ts";
import { withImageOrigin } from "../checkout/brand-style.ts";
import { logoOrigin } from "../vocabulary/shop-look.ts";
import { deliveriesPage, endpointPage } from "./deliveries-page.ts";
import { FormError, readForm, type Form } from "./form.ts";
import { exportRequestOf, sendExport } from "./export.ts";
import type { Explorers } from "../vocabulary/explorers.ts";

export interface DashboardPagesOptions {
  /** DASHBOARD_BASE_URL: its path is where the pages are; an https URL makes the cookies Secure. */
  dashboardBaseUrl: string;
  transport: Transport;
  /** Sign-in attempts (key and link), taken per client address and per key tried before anything is looked up. */
  signInLimiter: Limiter;
  /** Where each network's transactions are linked (EXPLORER_TX_URLS over the built-in ones). */
  explorers?: Explorers;
  /** When `transport` reaches the rpc role over the network (a gateway-only process): dashboardCallSecret, to prove the calls are the dashboard's. */
  callProofSecret?: Buffer;
  logger?: Logger;
}

/** No inline code, nothing from elsewhere, no framing; forms post only to the dashboard itself. */
export const dashboardContentSecurityPolicy =
  "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

const htmlHeaders: Readonly<Record<string, string>> = {
  ...commonHeaders,
  "Content-Type": "text/html; charset=utf-8",
  "Cache-Control": "no-store",
  "Content-Security-Policy": dashboardContentSecurityPolicy,
  "X-Frame-Options": "DENY",
};

/** What the session and pre-sign-in cookies are called; on https, `__Host-` ones (Secure, Path=/, this host only). */
const cookieNames = (host: boolean) => ({ session: `${host ? "__Host-" : ""}dashboard_session`, signIn: `${host ? "__Host-" : ""}dashboard_sign_in` });
/** An id in a path: the shapes newId and newTimedId make, nothing else is looked up. */
const idPattern = /^[a-z]{2,4}_(?:[0-9A-Za-z]{24}|[0-9A-Za-z]{26})$/;
/** An Idempotency-Key a page put in its form. */
const idemPattern = /^dash-[0-9A-Za-z]{24}$/;
const newIdem = () => `dash-${randomBase62(24)}`;

/** Confirmations shown after an action redirects back (fixed texts: nothing from the request is echoed). */
const doneTexts: Readonly<Record<string, string>> = {
  cancelled: "Payment cancelled.",
  disabled: "Endpoint disabled.",
  enabled: "Endpoint enabled.",
  tested: "Test event sent: its delivery is listed below.",
  replayed: "Delivery replayed: the new delivery is listed below.",
  updated: "Endpoint saved: its event types apply to events from now on.",
  created: "Payment created: send the shopper its checkout page (below).",
  revoked: "Key revoked: calls made with it are refused from now on.",
  refund_created: "Refund created: send the customer its link (below), or send the amount to the address they gave.",
  refund_cancelled: "Refund cancelled: its amount can be refunded again.",
  saved: "Shop settings saved: your pages show them from now on.",
};

/** A refusal or failure shown as a page of its own, with its HTTP status. */
class PageError extends Error {
  status: number;
  title: string;
  constructor(status: number, title: string, message: string) {
    super(message);
    this.status = status;
    this.title = title;
  }
}

function cookiesOf(req: http.IncomingMessage): Map<string, string> {
  const jar = new Map<string, string>();
  for (const part of (req.headers.cookie ?? "").split(";")) {
    const i = part.indexOf("=");
    if (i > 0) jar.set(part.slice(0, i).trim(), part.slice(i + 1).trim());
  }
  return jar;
}

/** A form's CSRF token: derived from the cookie it goes with, which another site can neither read nor set. */
function csrfOf(cookie: string): string {
  return createHmac("sha256", cookie).update("dashboard csrf").digest("base64url").slice(0, 32);
}

function sameToken(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

export function dashboardPages(o: DashboardPagesOptions): PageHandler {
  const base = pagesPathOf(o.dashboardBaseUrl, "DASHBOARD_BASE_URL");
  const secure = new URL(o.dashboardBaseUrl).protocol === "https:";
  const paths: pages.DashboardPaths = { base, ...dashboardAssetUrls(base) };
  // On https the cookies are __Host- ones: Secure, for the whole host and no other (a sibling
  // subdomain cannot set or shadow them). Plain http is for a developer's machine.
  const { session: sessionCookie, signIn: signInCookie } = cookieNames(secure);
  const cookieAttributes = secure ? "Path=/; HttpOnly; SameSite=Strict; Secure" : `Path=${base || "/"}; HttpOnly; SameSite=Strict`;
  /** A Live session's cookie is Secure even on http: a browser keeps it for localhost only. */
  const sessionAttributes = (environment: string) => (environment === "live" && !secure ? `${cookieAttributes}; Secure` : cookieAttributes);
  const intents = createClient(IntentService, o.transport);
  const webhooks = createClient(WebhookService, o.transport);
  const apiKeys = createClient(ApiKeyService, o.transport);
  const readiness = createClient(ReadinessService, o.transport);
  const dashboard = createClient(DashboardService, o.transport);
  const merchants = createClient(MerchantService, o.transport);
  const refunds = createClient(RefundService, o.transport);

  function owns(path: string): boolean {
    if (base === "") return path !== "/api" && !path.startsWith("/api/");
    return path === base || path.startsWith(`${base}/`);
  }

  /** A signed-in page's CSP: the shop's logo origin added to img-src (brand-style.ts), when it has a logo. */
  const pagePolicies = new WeakMap<http.ServerResponse, string>();

  function html(req: http.IncomingMessage, res: http.ServerResponse, status: number, body: string, extra: Record<string, string | string[]> = {}): void {
    const buf = Buffer.from(body);
    const policy = pagePolicies.get(res);
    res.writeHead(status, { ...htmlHeaders, ...(policy ? { "Content-Security-Policy": policy } : {}), ...extra, "Content-Length": buf.length });
    res.end(req.method === "HEAD" ? undefined : buf);
  }

  function redirect(res: http.ServerResponse, to: string, cookies: string[] = []): void {
    res.writeHead(303, { ...commonHeaders, Location: to, "Cache-Control": "no-store", "Content-Length": 0, ...(cookies.length ? { "Set-Cookie": cookies } : {}) });
    res.end();
  }

  /** The call options of an RPC made for this browser: its session (or the key it signs in with), its address. */
  function callOptions(credential: string | undefined, clientAddress: string, idem?: string) {
    const headers: Record<string, string> = { "x-forwarded-for": clientAddress };
    if (credential !== undefined) headers.authorization = `Bearer ${credential}`;
    if (credential !== undefined && o.callProofSecret) headers[dashboardCallHeader] = dashboardCallProof(o.callProofSecret, credential);
    if (idem !== undefined) headers["idempotency-key"] = idem;
    return { timeoutMs: 10_000, headers, contextValues: createContextValues().set(clientAddressKey, clientAddress).set(dashboardCallKey, true) };
  }

  /** Refusals of the API as pages: the API's own message (it never holds a secret) and status. */
  function pageErrorOf(err: unknown): PageError {
    if (err instanceof PageError) return err;
    if (err instanceof FormError) return new PageError(err.status, "Not done", err.message);
    const view = describeError(err);
    if (view.code === "not_found") return new PageError(404, "Not found", "There is no such item in this merchant's dashboard.");
    if (view.code === "insufficient_scope") {
      // The API names the scope it lacks ("… lacks the scope webhooks:read."): the page says which.
      const scope = /scope ([a-z_]+:[a-z_]+)/.exec(view.message)?.[1];
      return new PageError(403, "Not allowed", `This session may not do that${scope ? `: it needs the ${scope} scope, which its key or link does not have` : ": its key or link does not allow it"}. Sign in with a key that has it, or ask for a link that names it.`);
    }
    if (view.code === "rate_limited") return new PageError(429, "Too many requests", "Too many requests: wait a minute, then try again.");
    if (view.status >= 500) return new PageError(view.status, "Something went wrong", "This page cannot be shown right now. Please try again in a moment.");
    return new PageError(view.status, "Not done", view.message);
  }

  const isSignedOut = (err: unknown) => err instanceof ConnectError && err.code === Code.Unauthenticated;

  /** The session a token stands for now; undefined once it has ended. */
  async function currentSession(token: string, clientAddress: string): Promise<DashboardSession | undefined> {
    try {
      return (await dashboard.getDashboardSession({}, callOptions(token, clientAddress))).data;
    } catch (err) {
      if (!isSignedOut(err)) throw err;
      return undefined;
    }
  }

  return async (req, res, _url, clientAddress) => {
    const raw = (req.url ?? "/").split("?")[0] ?? "";
    if (!owns(raw)) return false;
    const query = new URL(req.url ?? "/", "http://dashboard").searchParams;
    const method = req.method ?? "GET";
    const rest = raw.slice(base.length);
    try {
      if (method !== "GET" && method !== "HEAD" && method !== "POST") {
        req.resume();
        throw new PageError(405, "Method not allowed", "This page takes GET and POST only.");
      }
      if (rest === "" || rest === "/") {
        redirect(res, `${base}/payments`);
        return true;
      }
      if (rest.length > 200 || /[%\\]|\.\.|\/\//.test(rest)) throw new PageError(404, "Not found", "There is no such page.");
      const parts = rest.slice(1).split("/");
      const [first = "", second, third, ...more] = parts;
      if (first === "assets" && second !== undefined && third === undefined) {
        if (!sendAsset(req, res, dashboardAssets, second)) throw new PageError(404, "Not found", "There is no such file.");
        return true;
      }
      const cookies = cookiesOf(req);
      const post = method === "POST";
      const form: Form = post ? await readForm(req) : new Map();

      // Sign-in pages: a cookie of their own carries the CSRF token until there is a session.
      if ((first === "sign-in" || first === "link") && second === undefined) {
        const pre = cookies.get(signInCookie);
        const preValid = pre !== undefined && /^[0-9A-Za-z]{32}$/.test(pre);
        const cookieValue = preValid ? pre : randomBase62(32);
        const setPre: Record<string, string> = preValid ? {} : { "Set-Cookie": `${signInCookie}=${cookieValue}; ${cookieAttributes}` };
        // The session this browser has now, if any: signing in ends it, and a link asks first.
        const earlierToken = cookies.get(sessionCookie);
        const earlier = earlierToken !== undefined && isDashboardSessionToken(earlierToken) ? await currentSession(earlierToken, clientAddress) : undefined;
        const replacing = first === "link" && earlier ? { merchantId: earlier.merchantId, environment: earlier.environment } : undefined;
        const render = (message?: string) => (first === "sign-in" ? pages.signInPage(paths, csrfOf(cookieValue), message) : pages.linkPage(paths, csrfOf(cookieValue), message, replacing));
        if (!post) {
          html(req, res, 200, render(), setPre);
          return true;
        }
        if (!preValid || !sameToken(form.get("csrf")?.[0] ?? "", csrfOf(cookieValue))) {
          html(req, res, 403, render("The form expired: please try again."), setPre);
          return true;
        }
        if (replacing && form.get("replace")?.[0] !== "1") {
          html(req, res, 409, render("You are signed in already: use the button below to end that session and sign in with this link."));
          return true;
        }
        const secret = (form.get(first === "sign-in" ? "api_key" : "token")?.[0] ?? "").trim();
        // Counted before anything is looked up, per address and per secret tried: guessing is slow either way.
        const waits = await Promise.all([o.signInLimiter.take(`address ${limitKeyOf(clientAddress)}`), o.signInLimiter.take(`secret ${createHash("sha256").update(secret).digest("hex")}`)]);
        const wait = Math.max(...waits);
        if (wait > 0) {
          html(req, res, 429, render("Too many sign-in attempts: wait a minute, then try again."), { "Retry-After": String(wait) });
          return true;
        }
        let session: DashboardSession | undefined;
        try {
          const opened =
            first === "sign-in"
              ? secret === "" || /\s/.test(secret)
                ? undefined
                : await dashboard.createDashboardSession({ apiKey: secret.slice(0, 128) }, callOptions(undefined, clientAddress))
              : await dashboard.exchangeDashboardLink({ token: secret.slice(0, 128) }, callOptions(undefined, clientAddress));
          session = opened?.data;
        } catch (err) {
          if (!isSignedOut(err) && describeError(err).status >= 500) throw err;
        }
        if (!session?.token) {
          // One answer for every failure: it never says whether a key exists.
          const message = first === "sign-in" ? "That API key was not accepted." : "This sign-in link is not valid: it may have been used already or have expired. Ask for a new one.";
          html(req, res, 401, render(message));
          return true;
        }
        if (earlier && earlierToken !== undefined) {
          // One session per browser: the one it had ends (a shared computer keeps no second one open).
          await dashboard.endDashboardSession({}, callOptions(earlierToken, clientAddress)).catch(() => undefined);
        }
        redirect(res, `${base}/payments`, [`${sessionCookie}=${session.token}; ${sessionAttributes(session.environment)}`, `${signInCookie}=; ${cookieAttributes}; Max-Age=0`]);
        return true;
      }

      // Everything else is signed in: the session is checked first, on every request.
      const token = cookies.get(sessionCookie);
      const session = token !== undefined && isDashboardSessionToken(token) ? await currentSession(token, clientAddress) : undefined;
      const clear = `${sessionCookie}=; ${sessionAttributes(token?.startsWith("dsh_live_") ? "live" : "test")}; Max-Age=0`;
      if (!session || token === undefined) {
        if (post) {
          html(req, res, 401, pages.messagePage(paths, "Signed out", "Your session has ended. Sign in again.", `${base}/sign-in`), { "Set-Cookie": clear });
        } else {
          redirect(res, `${base}/sign-in`, token === undefined ? [] : [clear]);
        }
        return true;
      }
      const v: pages.Viewer = { session, csrf: csrfOf(token) };
      const logo = logoOrigin(session.merchantLogoUrl);
      if (logo) pagePolicies.set(res, withImageOrigin(dashboardContentSecurityPolicy, logo));
      if (post && !sameToken(form.get("csrf")?.[0] ?? "", v.csrf)) throw new PageError(403, "Not allowed", "The form's security token is missing or wrong: reload the page and try again.");
      const merchant = session.merchantId;
      const opts = (idem?: string) => callOptions(token, clientAddress, idem);
      const idemOf = () => {
        const idem = form.get("idem")?.[0] ?? "";
        if (!idemPattern.test(idem)) throw new PageError(400, "Not done", "The form is missing its request key: reload the page and try again.");
        return idem;
      };
      const done = query.get("done");
      const noticeOf = () => (done !== null && Object.hasOwn(doneTexts, done) ? pages.notice(doneTexts[done] as string) : undefined);
      const idOf = (id: string | undefined) => {
        if (id === undefined || !idPattern.test(id)) throw new PageError(404, "Not found", "There is no such item in this merchant's dashboard.");
        return id;
      };
      const route =
        first === "payments" && (second === "new" || second === "export") && third === undefined
          ? `${post ? "POST" : "GET"} payments/${second}`
          : `${post ? "POST" : "GET"} ${first}${second === undefined ? "" : "/:id"}${third === undefined ? "" : `/${third}`}${more.length ? "/…" : ""}`;

      switch (route) {
        case "POST sign-out":
          await dashboard.endDashboardSession({}, opts());
          redirect(res, `${base}/sign-in`, [clear]);
          return true;
        case "GET payments": {
          const filters = filtersOf(query);
          let list: PaymentIntent[];
          let next: string | undefined;
          if (filters.search) {
            const found = await dashboard.searchPaymentIntents({ merchant, query: filters.search }, opts());
            list = await Promise.all(found.publicIds.map(async (publicId) => (await intents.getPaymentIntent({ merchant, publicId }, opts())).data as PaymentIntent));
          } else {
            const page = await intents.listPaymentIntents(
              {
                merchant,
                limit: 25,
                cursor: query.get("cursor") ?? undefined,
                status: filters.status,
                merchantReference: filters.reference,
                publicId: filters.publicId,
                createdAfter: filters.from ? timestampFromDate(new Date(Date.parse(`${filters.from}T00:00:00Z`) - 1)) : undefined,
                createdBefore: filters.to ? timestampFromDate(new Date(`${filters.to}T00:00:00Z`)) : undefined,
              },
              opts(),
            );
            list = page.data;
            next = page.hasMore ? page.nextCursor : undefined;
          }
          const exceptions = await dashboard.listPaymentExceptions({ merchant, publicIds: list.map((pi) => pi.publicId) }, opts());
          html(req, res, 200, pages.paymentsPage(paths, v, { intents: list, exceptions: new Map(exceptions.data.map((x) => [x.publicId, x.reasons])), filters, next }));
          return true;
        }
        case "GET payments/export": {
          await sendExport(req, res, intents, exportRequestOf(merchant, filtersOf(query)), opts());
          return true;
        }
        case "GET payments/new": {
          html(req, res, 200, pages.newPaymentPage(paths, v, { idem: newIdem() }));
          return true;
        }
        case "POST payments/new": {
          const values = { pair: form.get("pair")?.[0] ?? "", amount: (form.get("amount")?.[0] ?? "").trim(), currency: form.get("currency")?.[0] ?? "", reference: (form.get("reference")?.[0] ?? "").trim() };
          const [network = "", asset = ""] = values.pair.split(":");
          const priced = values.currency === "" ? { requestedAmount: values.amount } : { priceAmount: values.amount, priceCurrency: values.currency };
          try {
            const created = await intents.createPaymentIntent({ merchant, network, asset, ...priced, merchantReference: values.reference || undefined, metadata: {} }, opts(idemOf()));
            redirect(res, `${base}/payments/${created.data?.publicId ?? ""}?done=created`);
          } catch (err) {
            const view = describeError(err);
            // What the API refused, on the form again with what was typed (never a secret here).
            if (view.status !== 400 && view.status !== 409 && view.status !== 503) throw err;
            html(req, res, view.status, pages.newPaymentPage(paths, v, { idem: newIdem(), message: view.message, values }));
          }
          return true;
        }
        case "GET payments/:id": {
          const publicId = idOf(second);
          const [got, events, exceptions, refundList] = await Promise.all([
            intents.getPaymentIntent({ merchant, publicId }, opts()),
            dashboard.listPaymentIntentEvents({ merchant, publicId }, opts()),
            dashboard.listPaymentExceptions({ merchant, publicIds: [publicId] }, opts()),
            refunds.listRefunds({ merchant, publicId }, opts()),
          ]);
          const timeline = events.data.map((ev) => {
            const j = toJson(IntentEventSchema, ev) as unknown as { id: string; type: string; createdAt: string; data?: JsonValue };
            return { id: j.id, type: j.type, createdAt: j.createdAt, data: j.data ?? {} };
          });
          html(req, res, 200, pages.intentPage(paths, v, { intent: got.data as PaymentIntent, events: timeline, exceptions: exceptions.data[0]?.reasons ?? [], idem: newIdem(), notice: noticeOf(), explorers: o.explorers, refunds: refundsSection(paths, v, got.data as PaymentIntent, refundList.data, newIdem()) }));
          return true;
        }
        case "POST payments/:id/cancel": {
          const publicId = idOf(second);
          await intents.cancelPaymentIntent({ merchant, publicId }, opts(idemOf()));
          redirect(res, `${base}/payments/${publicId}?done=cancelled`);
          return true;
        }
        case "POST payments/:id/refund": {
          const publicId = idOf(second);
          const field = (name: string) => {
            const value = (form.get(name)?.[0] ?? "").trim();
            return value === "" ? undefined : value;
          };
          try {
            const made = await refunds.createRefund({ merchant, publicId, amount: field("amount"), payment: field("payment"), address: field("address"), reason: field("reason") }, opts(idemOf()));
            redirect(res, `${base}/refunds/${made.data?.id ?? ""}?done=refund_created`);
          } catch (err) {
            const view = describeError(err);
            // What the API refused (too much, no amount, a wrong address), said as it says it.
            if (view.status !== 400 && view.status !== 409) throw err;
            throw new PageError(view.status, "Refund not made", view.message);
          }
          return true;
        }
        case "GET refunds/:id": {
          const got = await refunds.getRefund({ merchant, refundId: idOf(second) }, opts());
          if (!got.data) throw new PageError(404, "Not found", "There is no such item in this merchant's dashboard.");
          html(req, res, 200, await refundPage(paths, v, { refund: got.data, idem: newIdem(), notice: noticeOf() }));
          return true;
        }
        case "GET refunds/:id/psbt": {
          const refundId = idOf(second);
          const feeRate = Number(query.get("fee_rate") ?? "");
          try {
            const got = await refunds.getRefundPsbt({ merchant, refundId, feeRate: Number.isInteger(feeRate) && feeRate > 0 && feeRate <= 2 ** 32 - 1 ? feeRate : 0 }, opts());
            // The binary PSBT, as wallets open a .psbt file (Sparrow, Electrum, Bitcoin Core's GUI).
            const body = Buffer.from(got.data?.psbt ?? "", "base64");
            res.writeHead(200, { ...commonHeaders, "Content-Type": "application/octet-stream", "Content-Disposition": `attachment; filename="${refundId}.psbt"`, "Cache-Control": "no-store", "Content-Length": body.length });
            res.end(req.method === "HEAD" ? undefined : body);
          } catch (err) {
            const view = describeError(err);
            // A rate out of range, a key without its origin, outputs that cannot cover it: said as the API says it.
            if (view.status !== 400 && view.status !== 409) throw err;
            throw new PageError(view.status, "No PSBT", view.message);
          }
          return true;
        }
        case "POST refunds/:id/cancel": {
          const refundId = idOf(second);
          await refunds.cancelRefund({ merchant, refundId }, opts(idemOf()));
          redirect(res, `${base}/refunds/${refundId}?done=refund_cancelled`);
          return true;
        }
        case "GET webhooks": {
          const list = await webhooks.listWebhookEndpoints({ merchant, limit: 100 }, opts());
          html(req, res, 200, pages.webhooksPage(paths, v, { endpoints: list.data, idem: newIdem() }));
          return true;
        }
        case "POST webhooks": {
          const description = form.get("description")?.[0]?.trim();
          const created = await webhooks.createWebhookEndpoint(
            { merchant, url: (form.get("url")?.[0] ?? "").trim(), description: description === "" ? undefined : description, enabledEvents: form.get("events") ?? [] },
            opts(idemOf()),
          );
          const list = await webhooks.listWebhookEndpoints({ merchant, limit: 100 }, opts());
          // The secret is on this answer only: the page is not cached, and no later page carries it.
          html(req, res, 200, pages.webhooksPage(paths, v, { endpoints: list.data, idem: newIdem(), created: created.data }));
          return true;
        }
        case "GET webhooks/:id": {
          const endpointId = idOf(second);
          const [endpoint, deliveries] = await Promise.all([
            webhooks.getWebhookEndpoint({ merchant, endpointId }, opts()),
            webhooks.listWebhookDeliveries({ merchant, endpointId, limit: 20, cursor: query.get("cursor") ?? undefined }, opts()),
          ]);
          if (!endpoint.data) throw new PageError(404, "Not found", "There is no such item in this merchant's dashboard.");
          html(req, res, 200, endpointPage(paths, v, { endpoint: endpoint.data, deliveries: deliveries.data, idem: newIdem, next: deliveries.hasMore ? deliveries.nextCursor : undefined, notice: noticeOf() }));
          return true;
        }
        case "POST webhooks/:id/update": {
          const endpointId = idOf(second);
          const events = form.get("events") ?? [];
          if (events.length === 0) throw new PageError(400, "Not done", "Tick at least one event type (All (*) for every type).");
          await webhooks.updateWebhookEndpoint({ merchant, endpointId, description: form.get("description")?.[0] ?? "", enabledEvents: events }, opts());
          redirect(res, `${base}/webhooks/${endpointId}?done=updated`);
          return true;
        }
        case "POST webhooks/:id/disable":
        case "POST webhooks/:id/enable":
        case "POST webhooks/:id/test": {
          const endpointId = idOf(second);
          if (third === "disable") await webhooks.disableWebhookEndpoint({ merchant, endpointId }, opts());
          else if (third === "enable") await dashboard.enableWebhookEndpoint({ merchant, endpointId }, opts());
          else await webhooks.testWebhookEndpoint({ merchant, endpointId }, opts());
          redirect(res, `${base}/webhooks/${endpointId}?done=${third === "test" ? "tested" : `${third}d`}`);
          return true;
        }
        case "GET deliveries": {
          const eventId = query.get("event") ?? undefined;
          if (eventId !== undefined) idOf(eventId);
          // The endpoints too, to name each delivery's by its URL rather than its id.
          const [deliveries, endpoints] = await Promise.all([
            webhooks.listWebhookDeliveries({ merchant, eventId, limit: 50 }, opts()),
            webhooks.listWebhookEndpoints({ merchant, limit: 100 }, opts()),
          ]);
          const endpointUrls = new Map(endpoints.data.map((ep) => [ep.id, ep.url]));
          html(req, res, 200, deliveriesPage(paths, v, { eventId, deliveries: deliveries.data, idem: newIdem, endpointUrls }));
          return true;
        }
        case "POST deliveries/:id/replay": {
          const deliveryId = idOf(second);
          const replayed = await webhooks.replayWebhookDelivery({ merchant, deliveryId }, opts(idemOf()));
          redirect(res, `${base}/webhooks/${replayed.data?.endpointId ?? ""}?done=replayed`);
          return true;
        }
        case "GET api-keys":
        case "POST api-keys": {
          // The key this session signed in with (a link's session has none): it is not offered for revocation.
          const own = (await apiKeys.getCurrentApiKey({}, opts())).data?.id;
          const chosen = post ? (form.get("scopes") ?? []) : [];
          let created;
          let message: string | undefined;
          let status = 200;
          if (post) {
            try {
              // The secret is on this answer only: the page is not cached, and no later page carries it.
              created = (await apiKeys.createApiKey({ merchant, scopes: chosen }, opts())).data;
            } catch (err) {
              const view = describeError(err);
              // What the API refused (no scope ticked, one the session lacks), on the form again; a
              // session that may not create keys at all gets the page naming api_keys:write.
              if ((view.status !== 400 && view.status !== 403) || !pages.can(v, "api_keys:write")) throw err;
              message = view.code === "insufficient_scope" ? "This session cannot give a scope it does not hold itself: tick only the scopes listed." : chosen.length === 0 ? "Tick at least one scope." : view.message;
              status = view.status;
            }
          }
          const list = await apiKeys.listApiKeys({ merchant, limit: 50, cursor: post ? undefined : (query.get("cursor") ?? undefined) }, opts());
          html(req, res, status, apiKeysPage(paths, v, { keys: list.data, own, next: list.hasMore ? list.nextCursor : undefined, created, message, chosen: created ? [] : chosen, notice: noticeOf() }));
          return true;
        }
        case "GET api-keys/:id/revoke": {
          const apiKeyId = idOf(second);
          const key = (await apiKeys.getApiKey({ merchant, apiKeyId }, opts())).data;
          if (!key) throw new PageError(404, "Not found", "There is no such item in this merchant's dashboard.");
          if (key.revokedAt) {
            redirect(res, `${base}/api-keys?done=revoked`);
            return true;
          }
          html(req, res, 200, revokeKeyPage(paths, v, key));
          return true;
        }
        case "POST api-keys/:id/revoke": {
          const apiKeyId = idOf(second);
          if (form.get("confirm")?.[0] !== "1") throw new PageError(400, "Not done", "Confirm the revocation on its page first.");
          await apiKeys.revokeApiKey({ merchant, apiKeyId }, opts());
          redirect(res, `${base}/api-keys?done=revoked`);
          return true;
        }
        case "GET settings":
        case "POST settings": {
          const current = (await merchants.getMerchantProfile({ merchant }, opts())).data;
          if (!post) {
            html(req, res, 200, settingsPage(paths, v, { values: valuesOf(current), profile: current, notice: noticeOf() }));
            return true;
          }
          const values = { name: (form.get("name")?.[0] ?? "").trim(), logoUrl: (form.get("logo_url")?.[0] ?? "").trim(), brandColor: (form.get("brand_color")?.[0] ?? "").trim() };
          try {
            await merchants.updateMerchantProfile({ merchant, ...values }, opts());
          } catch (err) {
            // A refused value: the form again with what was typed and why (nothing was changed).
            const view = describeError(err);
            if (view.status !== 400) throw err;
            html(req, res, 400, settingsPage(paths, v, { values, profile: current, message: view.message }));
            return true;
          }
          redirect(res, `${base}/settings?done=saved`);
          return true;
        }
        case "GET readiness": {
          const got = await readiness.getGoLiveReadiness({ merchant }, opts());
          if (!got.data) throw new PageError(500, "Something went wrong", "This page cannot be shown right now.");
          html(req, res, 200, pages.readinessPage(paths, v, got.data));
          return true;
        }
        default:
          throw new PageError(post ? 405 : 404, post ? "Method not allowed" : "Not found", "There is no such page.");
      }
    } catch (err) {
      const page = pageErrorOf(err);
      if (page.status >= 500 && !(err instanceof PageError)) o.logger?.error({ err, path: raw }, "dashboard page failed");
      if (!res.headersSent) html(req, res, page.status, pages.messagePage(paths, page.title, page.message), page.status === 405 ? { Allow: "GET, HEAD, POST" } : {});
      return true;
    }
  };
}

/** The payments list's filters from the query; a malformed one is refused before any call. */
function filtersOf(query: URLSearchParams): pages.PaymentFilters {
  const text = (name: string, max: number) => {
    const value = query.get(name)?.trim() ?? "";
    if (value.length > max) throw new PageError(400, "Not done", `The filter ${name} is too long.`);
    return value === "" ? undefined : value;
  };
  const date = (name: string) => {
    const value = text(name, 10);
    if (value !== undefined && !(/^\d{4}-\d{2}-\d{2}$/.test(value) && !Number.isNaN(Date.parse(`${value}T00:00:00Z`)))) {
      throw new PageError(400, "Not done", `The date ${name} must be YYYY-MM-DD.`);
    }
    return value;
  };
  return { status: text("status", 16), reference: text("reference", 128), publicId: text("public_id", 64), search: text("search", 128), from: date("from"), to: date("to") };
}
