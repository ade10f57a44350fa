import type { Route } from "../../gen/payments/v1/options_pb.ts";
import { Credential } from "../../gen/payments/v1/options_pb.ts";
import type { EntityManager } from "../platform/db.ts";
import { apiError } from "../platform/errors.ts";
import { hashApiKey, parseBearer, parseCashierBearer, parseInternalBearer, parseSiteBearer } from "./keys.ts";
import type { CashierPrincipal, InternalPrincipal, MerchantPrincipal, Principal, SitePrincipal } from "./principal.ts";

/**
 * Resolves and authorizes the caller of a route: the credential kind the route
 * takes, the credential, then scope. (The merchant in the request is checked by
 * the interceptor, which sees the message.)
 */
export async function authenticate(em: EntityManager, route: Route, authorization: string | null): Promise<Principal> {
  switch (route.credential) {
    case Credential.UNSPECIFIED:
    case Credential.TEST_API_KEY:
      return apiKeyCaller(em, route, authorization);
    case Credential.INTERNAL:
      return internalCaller(em, authorization);
    case Credential.SITE_GATEWAY:
      return siteCaller(em, authorization);
    case Credential.CASHIER_SESSION:
      return cashierCaller(em, authorization);
    case Credential.PUBLIC:
      return { kind: "public" };
    default:
      throw apiError("unauthenticated", "This route does not accept this credential.");
  }
}

async function apiKeyCaller(em: EntityManager, route: Route, authorization: string | null): Promise<MerchantPrincipal> {
  const bearer = parseBearer(authorization);
  if (!bearer.ok) {
    throw apiError(
      "unauthenticated",
      bearer.reason === "missing"
        ? "Send your API key as: Authorization: Bearer <api_key>."
        : "The Authorization header must be: Bearer <api_key>.",
    );
  }
  // Every request runs this lookup: plain SQL on the unique index, no ORM hydration.
  const [key] = await em.execute<{ id: string; merchant_id: string; environment: string; scopes: string[]; revoked_at: unknown }[]>(
    `select id, merchant_id, environment, scopes, revoked_at from api_keys where secret_hash = ?`,
    [hashApiKey(bearer.secret)],
  );
  if (!key || key.revoked_at) throw apiError("invalid_api_key", "The API key is unknown or revoked.");
  if (route.credential === Credential.TEST_API_KEY && key.environment !== "test") {
    throw apiError("test_mode_only", "This route accepts only a Test API key.");
  }
  if (route.scope && !key.scopes.includes(route.scope)) {
    throw apiError("insufficient_scope", `The API key lacks the scope ${route.scope}.`);
  }
  return {
    kind: "api_key",
    keyId: key.id,
    merchantId: key.merchant_id,
    environment: key.environment === "live" ? "live" : "test",
    scopes: new Set(key.scopes),
  };
}

async function internalCaller(em: EntityManager, authorization: string | null): Promise<InternalPrincipal> {
  const bearer = parseInternalBearer(authorization);
  if (!bearer.ok) {
    throw apiError(
      "unauthenticated",
      bearer.reason === "missing"
        ? "Send your internal credential as: Authorization: Bearer <credential>."
        : "This route takes an internal credential (int_…), sent as: Authorization: Bearer <credential>.",
    );
  }
  const [credential] = await em.execute<{ id: string; name: string; revoked_at: unknown }[]>(
    `select id, name, revoked_at from internal_credentials where secret_hash = ?`,
    [hashApiKey(bearer.secret)],
  );
  if (!credential || credential.revoked_at) throw apiError("unauthenticated", "The internal credential is unknown or revoked.");
  return { kind: "internal", credentialId: credential.id, name: credential.name };
}

async function siteCaller(em: EntityManager, authorization: string | null): Promise<SitePrincipal> {
  const bearer = parseSiteBearer(authorization);
  if (!bearer.ok) {
    throw apiError(
      "unauthenticated",
      bearer.reason === "missing"
        ? "Send your site credential as: Authorization: Bearer <site credential>."
        : "This route takes a Site Gateway credential (site_test_… or site_live_…), sent as: Authorization: Bearer <credential>.",
    );
  }
  const [credential] = await em.execute<{ id: string; merchant_id: string; environment: string; allowed_origins: string[]; revoked_at: unknown }[]>(
    `select id, merchant_id, environment, allowed_origins, revoked_at from site_credentials where secret_hash = ?`,
    [hashApiKey(bearer.secret)],
  );
  if (!credential || credential.revoked_at) throw apiError("unauthenticated", "The site credential is unknown or revoked.");
  return {
    kind: "site",
    credentialId: credential.id,
    merchantId: credential.merchant_id,
    environment: credential.environment === "live" ? "live" : "test",
    allowedOrigins: credential.allowed_origins,
  };
}

async function cashierCaller(em: EntityManager, authorization: string | null): Promise<CashierPrincipal> {
  const bearer = parseCashierBearer(authorization);
  if (!bearer.ok) {
    throw apiError(
      "unauthenticated",
      bearer.reason === "missing"
        ? "Send the cashier session as: Authorization: Bearer <session>."
        : "This route takes a cashier session (pos_test_… or pos_live_…), sent as: Authorization: Bearer <session>.",
    );
  }
  const [session] = await em.execute<
    { id: string; merchant_id: string; environment: string; cashier: string; terminal: string | null; expires_at: Date | string; revoked_at: unknown }[]
  >(`select id, merchant_id, environment, cashier, terminal, expires_at, revoked_at from cashier_sessions where secret_hash = ?`, [hashApiKey(bearer.secret)]);
  if (!session || session.revoked_at) throw apiError("unauthenticated", "The cashier session is unknown or revoked.");
  if (new Date(session.expires_at).getTime() <= Date.now()) {
    throw apiError("session_expired", "The cashier session has expired; sign the cashier in again (admin cashier-session create).");
  }
  return {
    kind: "cashier",
    sessionId: session.id,
    merchantId: session.merchant_id,
    environment: session.environment === "live" ? "live" : "test",
    cashier: session.cashier,
    terminal: session.terminal,
  };
}
