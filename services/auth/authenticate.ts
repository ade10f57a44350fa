import type { Route } from "../../gen/payments/v1/options_pb.ts";
import { Credential } from "../../gen/payments/v1/options_pb.ts";
import type { EntityManager } from "../platform/db.ts";
import { apiError } from "../platform/errors.ts";
import { hashApiKey, parseBearer, parseCashierBearer, parseDashboardBearer, parseInternalBearer, parseSiteBearer } from "./keys.ts";
import { dashboardSessionCaller } from "./dashboard-sessions.ts";
import type { CredentialCache, CredentialKind } from "./credential-cache.ts";
import type { CashierPrincipal, InternalPrincipal, InternalRole, MerchantPrincipal, Principal, SitePrincipal } from "./principal.ts";

/**
 * Resolves and authorizes the caller of a route: the credential kind the route
 * takes, the credential, then scope. (The merchant in the request is checked by
 * the interceptor, which sees the message.)
 *
 * One rule for every credential kind, so that the answer says nothing about what a
 * token looks like: no Authorization header, or one that is not "Bearer <token>", is
 * unauthenticated; any bearer token that is not an active credential of the kind this
 * route takes (malformed, of another kind, unknown, revoked, or an internal credential past its
 * expiry) is invalid_api_key. Only the holder of a real cashier session can learn that it expired
 * (session_expired). A dashboard session token is taken only when `dashboardCall` (the call is the
 * dashboard's own: dashboardCallKey); on any other call it is one more token that is no key.
 */
export async function authenticate(em: EntityManager, route: Route, authorization: string | null, cache?: CredentialCache, dashboardCall = false): Promise<Principal> {
  if (route.credential !== Credential.PUBLIC) requireBearer(authorization, route.credential);
  // Plain SQL on the secret hash's unique index, no ORM hydration; a verified row is cached, never past its own expiry.
  const find = <T>(kind: CredentialKind, secretHash: string, sql: string, expiresAt?: (row: T) => number | null): Promise<T | undefined> => {
    const load = async () => (await em.execute<T[]>(sql, [secretHash]))[0];
    return cache ? cache.lookup(kind, secretHash, load, expiresAt) : load();
  };
  switch (route.credential) {
    case Credential.UNSPECIFIED:
    case Credential.TEST_API_KEY: {
      // A dashboard session acts with its key's (or link's) scopes wherever the key could.
      const session = dashboardCall ? parseDashboardBearer(authorization) : undefined;
      return session === undefined ? apiKeyCaller(find, route, authorization) : authorizeKeyCaller(route, await dashboardSessionCaller(em, session, () => invalidCredential(route.credential)));
    }
    case Credential.INTERNAL:
      return internalCaller(find, authorization);
    case Credential.SITE_GATEWAY:
      return siteCaller(find, authorization);
    case Credential.CASHIER_SESSION:
      return cashierCaller(find, authorization);
    case Credential.PUBLIC:
      return { kind: "public" };
    default:
      throw apiError("unauthenticated", "This route does not accept this credential.");
  }
}

/** What each credential kind is called in messages, and how to send it. */
const kindNames: Partial<Record<Credential, string>> = {
  [Credential.INTERNAL]: "an internal credential (int_…)",
  [Credential.SITE_GATEWAY]: "a Site Gateway credential (site_test_… or site_live_…)",
  [Credential.CASHIER_SESSION]: "a cashier session (pos_test_… or pos_live_…)",
};
const kindOf = (credential: Credential) => kindNames[credential] ?? "an API key (sk_test_… or sk_live_…)";

/** A bearer token is one token68 (RFC 9110 11.2): two credentials in one header ("a, b") are none. */
const bearerSyntax = /^Bearer +[A-Za-z0-9\-._~+/]+=* *$/i;

function requireBearer(authorization: string | null, credential: Credential): void {
  if (authorization !== null && bearerSyntax.test(authorization)) return;
  const missing = authorization === null || authorization.trim() === "";
  // Stripe's `curl -u "$KEY:"` habit: say why it is refused (docs/api.md), never what was sent.
  if (authorization !== null && /^\s*Basic\b/i.test(authorization)) {
    throw apiError("unauthenticated", `HTTP Basic (curl -u) is not accepted, so that no browser stores the key and resends it: send ${kindOf(credential)} as: Authorization: Bearer <credential>.`);
  }
  throw apiError(
    "unauthenticated",
    `${missing ? "Send" : "The Authorization header must carry"} ${kindOf(credential)} as: Authorization: Bearer <credential>.`,
  );
}

function invalidCredential(credential: Credential): never {
  throw apiError("invalid_api_key", `This route takes ${kindOf(credential)}; the one sent is unknown, revoked, or of another kind.`);
}

type Find = <T>(kind: CredentialKind, secretHash: string, sql: string, expiresAt?: (row: T) => number | null) => Promise<T | undefined>;

/** A timestamp column's value (a Date, or text from a driver that does not parse it) in ms; null stays null. */
const msOf = (v: Date | string | null): number | null => (v === null ? null : new Date(v).getTime());

async function apiKeyCaller(find: Find, route: Route, authorization: string | null): Promise<MerchantPrincipal> {
  const bearer = parseBearer(authorization);
  if (!bearer.ok) invalidCredential(route.credential);
  const key = await find<{ id: string; merchant_id: string; environment: string; scopes: string[]; revoked_at: unknown }>(
    "api_key",
    hashApiKey(bearer.secret),
    `select id, merchant_id, environment, scopes, revoked_at from api_keys where secret_hash = ?`,
  );
  if (!key || key.revoked_at) invalidCredential(route.credential);
  return authorizeKeyCaller(route, {
    kind: "api_key",
    keyId: key.id,
    merchantId: key.merchant_id,
    environment: key.environment === "live" ? "live" : "test",
    scopes: new Set(key.scopes),
  });
}

/** The route's environment and scope, for a key or a dashboard session acting for one. */
function authorizeKeyCaller(route: Route, caller: MerchantPrincipal): MerchantPrincipal {
  if (route.credential === Credential.TEST_API_KEY && caller.environment !== "test") {
    throw apiError("test_mode_only", "This route accepts only a Test API key.");
  }
  if (route.scope && !caller.scopes.has(route.scope)) {
    throw apiError("insufficient_scope", `The API key lacks the scope ${route.scope}.`);
  }
  if (route.liveScope && caller.environment === "live" && !caller.scopes.has(route.liveScope)) {
    throw apiError("insufficient_scope", `The API key lacks the scope ${route.liveScope}, which a Live key needs here besides ${route.scope}.`);
  }
  return caller;
}

async function internalCaller(find: Find, authorization: string | null): Promise<InternalPrincipal> {
  const bearer = parseInternalBearer(authorization);
  if (!bearer.ok) invalidCredential(Credential.INTERNAL);
  // An expiring credential (a watcher's beside the rpc role) is refused from its expiry on, cached or not.
  const credential = await find<{ id: string; name: string; roles: string[]; environment: string | null; networks: string[] | null; revoked_at: unknown; expires_at: Date | string | null }>(
    "internal",
    hashApiKey(bearer.secret),
    `select id, name, roles, environment, networks, revoked_at, expires_at from internal_credentials where secret_hash = ?`,
    (row) => msOf(row.expires_at),
  );
  if (!credential || credential.revoked_at) invalidCredential(Credential.INTERNAL);
  const expiresAt = msOf(credential.expires_at);
  if (expiresAt !== null && expiresAt <= Date.now()) invalidCredential(Credential.INTERNAL);
  return {
    kind: "internal",
    credentialId: credential.id,
    name: credential.name,
    roles: new Set(credential.roles.filter((r): r is InternalRole => r === "observe" || r === "admin")),
    environment: credential.environment === "live" ? "live" : credential.environment === "test" ? "test" : undefined,
    networks: credential.networks === null ? undefined : new Set(credential.networks),
  };
}

async function siteCaller(find: Find, authorization: string | null): Promise<SitePrincipal> {
  const bearer = parseSiteBearer(authorization);
  if (!bearer.ok) invalidCredential(Credential.SITE_GATEWAY);
  const credential = await find<{ id: string; merchant_id: string; environment: string; allowed_origins: string[]; revoked_at: unknown }>(
    "site",
    hashApiKey(bearer.secret),
    `select id, merchant_id, environment, allowed_origins, revoked_at from site_credentials where secret_hash = ?`,
  );
  if (!credential || credential.revoked_at) invalidCredential(Credential.SITE_GATEWAY);
  return {
    kind: "site",
    credentialId: credential.id,
    merchantId: credential.merchant_id,
    environment: credential.environment === "live" ? "live" : "test",
    allowedOrigins: credential.allowed_origins,
  };
}

async function cashierCaller(find: Find, authorization: string | null): Promise<CashierPrincipal> {
  const bearer = parseCashierBearer(authorization);
  if (!bearer.ok) invalidCredential(Credential.CASHIER_SESSION);
  // Expiry is checked on every request, cached row or not.
  const session = await find<{ id: string; merchant_id: string; environment: string; cashier: string; terminal: string | null; expires_at: Date | string; revoked_at: unknown }>(
    "cashier",
    hashApiKey(bearer.secret),
    `select id, merchant_id, environment, cashier, terminal, expires_at, revoked_at from cashier_sessions where secret_hash = ?`,
  );
  if (!session || session.revoked_at) invalidCredential(Credential.CASHIER_SESSION);
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
