import { Code, ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import { create, fromJson } from "@bufbuild/protobuf";
import { Credential, RouteSchema } from "../../gen/payments/v1/options_pb.ts";
import { authenticate } from "../auth/authenticate.ts";
import type { EntityManager } from "../platform/db.ts";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { DashboardService, IntentEventSchema, type DashboardSession } from "../../gen/payments/v1/dashboard_pb.ts";
import { readOnlyScopes } from "../auth/dashboard-sessions.ts";
import { merchantLook } from "../auth/merchants.ts";
import type { ShopLook } from "../vocabulary/shop-look.ts";

/** The merchant's name and look for a session's view ("" and none when there is no such merchant). */
const shopLook = async (em: Parameters<typeof merchantLook>[0], merchantId: string): Promise<ShopLook> => (await merchantLook(em, merchantId)) ?? { name: "" };
import type { MerchantPrincipal } from "../auth/principal.ts";
import { apiError } from "../platform/errors.ts";
import { inTransaction, merchantRequest, requestOf } from "../rpc/context.ts";
import { findEndpoint } from "../webhooks/store.ts";
import { enableEndpoint } from "../webhooks/operations.ts";
import { endDashboardSession, exchangeDashboardLink, openKeySession, type OpenedSession, type SessionLifetime } from "./sessions.ts";
import { intentEvents, intentExceptions, searchIntents } from "./queries.ts";

export interface DashboardDeps {
  dashboardSessions: SessionLifetime;
  /** EVENT_RETENTION, in seconds: an intent's history shows the events the API still answers. */
  eventRetentionSeconds: number;
}

/** How the key given to sign in is checked: as any route taking an API key, with no scope of its own. */
const signInRoute = create(RouteSchema, { credential: Credential.UNSPECIFIED });

/**
 * The key a sign-in gives, checked as a call with it would be. One refusal for every failure
 * (unknown, revoked, malformed, a session token): nothing tells whether a key exists.
 */
async function keyOf(em: EntityManager, apiKey: string): Promise<MerchantPrincipal> {
  const refused = () => apiError("invalid_api_key", "That API key was not accepted.");
  if (!/^\S+$/.test(apiKey)) throw refused();
  let principal;
  try {
    principal = await authenticate(em, signInRoute, `Bearer ${apiKey}`);
  } catch (err) {
    if (err instanceof ConnectError && err.code === Code.Unauthenticated) throw refused();
    throw err;
  }
  // A session signs in no other session: only a key opens one.
  if (principal.kind !== "api_key" || principal.session) throw refused();
  return principal;
}

/** The session a dashboard call is made with; a bare API key is refused (it has no session to show or end). */
function sessionRequest(ctx: HandlerContext) {
  const request = merchantRequest(ctx);
  if (!request.principal.session) throw apiError("invalid_api_key", "This method takes a dashboard session.");
  return request as typeof request & { principal: MerchantPrincipal & { session: NonNullable<MerchantPrincipal["session"]> } };
}

function view(s: Pick<OpenedSession, "merchantId" | "environment" | "readOnly" | "expiresAt" | "idleSeconds">, scopes: Iterable<string>, look: ShopLook, token?: string): DashboardSession {
  const granted = [...scopes].sort();
  return {
    $typeName: "payments.v1.DashboardSession",
    token,
    merchantId: s.merchantId,
    merchantName: look.name,
    merchantLogoUrl: look.logoUrl,
    merchantBrandColor: look.brandColor,
    environment: s.environment,
    scopes: granted,
    // Read-only as the merchant sees it: a read-only link, or nothing it may write.
    readOnly: s.readOnly || !granted.some((g) => g.endsWith(":write")),
    expiresAt: timestampFromDate(s.expiresAt),
    idleSeconds: s.idleSeconds,
  };
}

/** DashboardService: the dashboard's sessions, and the reads and action the merchant API has no route for. */
export function dashboardService(deps: DashboardDeps): ServiceImpl<typeof DashboardService> {
  const lifetime = deps.dashboardSessions;
  return {
    async createDashboardSession(req, ctx) {
      const { em } = requestOf(ctx, "public");
      const principal = await keyOf(em, req.apiKey);
      const opened = await openKeySession(em, principal, lifetime);
      return { data: view(opened, principal.scopes, await shopLook(em, opened.merchantId), opened.token) };
    },
    async exchangeDashboardLink(req, ctx) {
      const { em } = requestOf(ctx, "public");
      const opened = await inTransaction(em, (tx) => exchangeDashboardLink(tx, req.token, lifetime));
      const granted = opened.scopes ?? [];
      return { data: view(opened, opened.readOnly ? readOnlyScopes(granted) : granted, await shopLook(em, opened.merchantId), opened.token) };
    },
    async getDashboardSession(_req, ctx) {
      const { principal } = sessionRequest(ctx);
      return { data: view({ ...principal, ...principal.session }, principal.scopes, { name: principal.session.merchantName, logoUrl: principal.session.merchantLogoUrl, brandColor: principal.session.merchantBrandColor }) };
    },
    async endDashboardSession(_req, ctx) {
      const { principal, em } = sessionRequest(ctx);
      await endDashboardSession(em, principal.session.id);
      return {};
    },
    async searchPaymentIntents(req, ctx) {
      const { principal, em } = merchantRequest(ctx);
      return { publicIds: await searchIntents(em, principal, req.query.trim()) };
    },
    async listPaymentExceptions(req, ctx) {
      const { principal, em } = merchantRequest(ctx);
      const found = await intentExceptions(em, principal, req.publicIds);
      return { data: found.map((e) => ({ publicId: e.publicId, reasons: e.reasons })) };
    },
    async listPaymentIntentEvents(req, ctx) {
      const { principal, em } = merchantRequest(ctx);
      const events = await intentEvents(em, principal, req.publicId, deps.eventRetentionSeconds);
      if (events === undefined) throw apiError("not_found", `No payment intent ${req.publicId}.`, "public_id");
      return { data: events.map((e) => fromJson(IntentEventSchema, { id: e.id, type: e.type, createdAt: e.createdAt, data: e.data })) };
    },
    async enableWebhookEndpoint(req, ctx) {
      const { principal, em } = merchantRequest(ctx);
      // Another merchant's endpoint is not found, as everywhere else.
      if (!(await findEndpoint(em, principal, req.endpointId))) throw apiError("not_found", `No webhook endpoint ${req.endpointId}.`, "endpoint_id");
      const enabled = await enableEndpoint(em, req.endpointId, new Date(), principal.environment);
      return { endpointId: enabled.id, status: enabled.status };
    },
  };
}
