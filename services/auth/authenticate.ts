import type { Route } from "../../gen/payments/v1/options_pb.ts";
import { Credential } from "../../gen/payments/v1/options_pb.ts";
import type { EntityManager } from "../platform/db.ts";
import { apiError } from "../platform/errors.ts";
import type { Principal } from "../rpc/context.ts";
import { hashApiKey, parseBearer } from "./keys.ts";

/**
 * Resolves and authorizes the caller of a route: credential, then scope.
 * (The merchant in the request is checked by the interceptor, which sees the message.)
 */
export async function authenticate(em: EntityManager, route: Route, authorization: string | null): Promise<Principal> {
  if (route.credential !== Credential.UNSPECIFIED && route.credential !== Credential.TEST_API_KEY) {
    // Site Gateway, cashier and internal credentials arrive with the routes that use them.
    throw apiError("unauthenticated", "This route does not accept an API key.");
  }
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
    keyId: key.id,
    merchantId: key.merchant_id,
    environment: key.environment === "live" ? "live" : "test",
    scopes: new Set(key.scopes),
  };
}
