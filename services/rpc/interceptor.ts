import { getOption, hasOption, type DescMessage, type DescMethod } from "@bufbuild/protobuf";
import { ConnectError, type Interceptor, type StreamResponse, type UnaryResponse } from "@connectrpc/connect";
import { InternalRole, route as routeOption, type Route } from "../../gen/payments/v1/options_pb.ts";
import { authenticate } from "../auth/authenticate.ts";
import type { CredentialCache } from "../auth/credential-cache.ts";
import type { KeyLastUse } from "../auth/key-last-use.ts";
import { dashboardCallKey } from "../auth/dashboard-sessions.ts";
import { canonicalOrigin } from "../auth/keys.ts";
import { checkIdempotencyKey } from "../idempotency/key.ts";
import { claimFor, inProgressOnLockTimeout, NeedsTransaction, runIdempotent } from "../idempotency/idempotent.ts";
import type { Database } from "../platform/db.ts";
import { addBounded } from "../platform/bounded.ts";
import { apiError, describeError, isDatabaseUnavailable } from "../platform/errors.ts";
import { newId } from "../platform/ids.ts";
import type { Logger } from "../platform/logger.ts";
import { OutageLog } from "../platform/outage.ts";
import type { Limiter } from "../platform/rate-limit.ts";
import type { InternalPrincipal, InternalRole as RoleName, Principal } from "../auth/principal.ts";
import { clientAddressKey, limitKeyOf } from "../platform/client-address.ts";
import { claimKey } from "../idempotency/context-keys.ts";
import { deferredRefusalHeader, decodeRefusal } from "../platform/deferred-refusal.ts";
import { emKey, principalKey } from "./context.ts";
import { checkFieldRules } from "./field-rules.ts";
import { oneMessage } from "./stream-request.ts";

const requestIdPattern = /^[A-Za-z0-9_.:-]{1,64}$/;

/**
 * Every RPC passes here: request id, then the route's credential and scope,
 * then the merchant in the request against the key's, then what was sent (the
 * request's field rules), then idempotency.
 * All of it is read from the method's (payments.v1.route) option.
 */
export interface ServiceInterceptorOptions {
  /** Verified credentials, kept between requests. */
  credentials?: CredentialCache;
  /** Idempotent methods whose handler writes in one statement with its key's claim (claimKey). */
  oneStatement?: ReadonlySet<DescMethod>;
  /**
   * Limits of the routes whose option says rate_limited, on every transport, since all pass here:
   * a public route's calls per client address (IPv6 by /64); an API key's reads (GET routes) and
   * writes (the rest) in two token buckets per key; a site credential's creates per credential
   * and its reads per credential and client address; a cashier session's calls per session and
   * per client address.
   */
  limits?: Limits;
  /** IDEMPOTENCY_RETENTION, in seconds (default 24 h): an older key's row is absent. */
  idempotencyRetentionSeconds?: number;
  /** Where each API key's last use is recorded (at most once a minute per key, off the request's path). */
  lastUse?: KeyLastUse;
}

export interface Limits {
  perAddress: Limiter;
  /** Public methods with a budget of their own ("payments.v1.CheckoutService/GetCheckout"), instead of perAddress. */
  perAddressOf?: ReadonlyMap<string, Limiter>;
  perCredential: Limiter;
  apiReads: Limiter;
  apiWrites: Limiter;
  siteReads: Limiter;
  cashier: { perSession: Limiter; perAddress: Limiter };
}

interface LimitCheck {
  limiter: Limiter;
  key: string;
  message: string;
}

/** Which budgets a rate-limited call takes from, under which keys, and what a refusal says. */
function limitsOf(limits: Limits, route: Route, method: DescMethod, principal: Principal, address: string): LimitCheck[] {
  const read = route.method === "GET";
  const client = limitKeyOf(address);
  switch (principal.kind) {
    case "public": {
      const name = `${method.parent.typeName}/${method.name}`;
      return [{ limiter: limits.perAddressOf?.get(name) ?? limits.perAddress, key: `${method.name} ${client}`, message: "Too many requests from this address; retry later." }];
    }
    case "api_key":
      return read
        ? [{ limiter: limits.apiReads, key: principal.keyId, message: "Too many reads with this API key; retry later." }]
        : [{ limiter: limits.apiWrites, key: principal.keyId, message: "Too many writes with this API key; retry later." }];
    case "site":
      return read
        ? [{ limiter: limits.siteReads, key: `${principal.credentialId} ${client}`, message: "Too many reads with this site credential from this address; retry later." }]
        : [{ limiter: limits.perCredential, key: `site ${principal.credentialId}`, message: "Too many requests with this credential; retry later." }];
    case "cashier":
      // A stolen session is stopped by its own budget; many sessions used from one place, by the address's.
      return [
        { limiter: limits.cashier.perSession, key: `${method.name} ${principal.sessionId}`, message: "Too many requests with this cashier session; retry later." },
        { limiter: limits.cashier.perAddress, key: `${method.name} ${client}`, message: "Too many requests from this address; retry later." },
      ];
    default:
      return [{ limiter: limits.perCredential, key: `${principal.kind} ${principal.credentialId}`, message: "Too many requests with this credential; retry later." }];
  }
}

export function createServiceInterceptor(db: Database, logger: Logger, o: ServiceInterceptorOptions = {}): Interceptor {
  const { credentials, oneStatement = new Set(), limits } = o;
  const databaseOutage = new OutageLog(logger, "database");
  // Keys this process answered lately: a repeat is a replay, which the transactional path answers
  // without the one-statement attempt's work (an address derived for nothing).
  const answered = new Set<string>();
  /** What a caller is told of a failure: an outage as one, anything unexpected logged and hidden. */
  function answerOf(err: unknown, requestId: string, rpc: string, allowOrigin: string | undefined): ConnectError {
    const view = describeError(err);
    let out: ConnectError;
    if (view.code === "internal_error" && isDatabaseUnavailable(err)) {
      // An outage, not a bug: the client may retry (a create rolled back with its Idempotency-Key).
      // The outage is logged once, with the error's message only: never the request or the error's fields.
      databaseOutage.failed(err);
      out = apiError("unavailable", "The database is unavailable; retry shortly.");
    } else {
      if (view.code === "internal_error") logger.error({ err, requestId, rpc }, "rpc failed");
      out = err instanceof ConnectError && view.code !== "internal_error" ? err : apiError("internal_error", view.message);
    }
    out.metadata.set("x-request-id", requestId);
    if (allowOrigin) out.metadata.set("access-control-allow-origin", allowOrigin);
    return out;
  }
  return (next) => async (incoming) => {
    let req = incoming;
    const given = req.header.get("x-request-id");
    const requestId = given && requestIdPattern.test(given) ? given : newId("req");
    // CORS: a site credential's answers (errors too) may be read by its allowed origins only.
    let allowOrigin: string | undefined;
    try {
      // A server stream's one message is read here, once, and handed on readable again.
      let message: unknown;
      if (req.stream) ({ req, message } = await oneMessage(req));
      else message = req.message;
      const route = routeOf(req.method);
      if (!route) throw apiError("route_not_found", "This method is not callable.");
      const em = db.em.fork();
      const principal = await authenticate(em, route, req.header.get("authorization"), credentials, req.contextValues.get(dashboardCallKey));
      // The key itself authenticated this call (a dashboard session acting for it is not a use of it).
      if (principal.kind === "api_key" && !principal.session) o.lastUse?.seen(principal.keyId);
      if (route.rateLimited && limits) {
        for (const { limiter, key, message } of limitsOf(limits, route, req.method, principal, req.contextValues.get(clientAddressKey))) {
          const wait = await limiter.take(key);
          if (wait > 0) {
            const err = apiError("rate_limited", message);
            err.metadata.set("retry-after", String(wait));
            throw err;
          }
        }
      }
      if (principal.kind === "api_key") checkMerchant(req.method.input, message, principal.merchantId);
      if (principal.kind === "internal") checkInternalRole(principal, route.internalRole);
      if (principal.kind === "site") allowOrigin = checkSiteOrigin(principal.allowedOrigins, req.header.get("origin"));
      // Only now what was sent: a caller who may not make this call learns nothing about its input.
      const refusal = req.header.get(deferredRefusalHeader);
      if (refusal !== null) throw decodeRefusal(refusal);
      checkFieldRules(req.method.input, message as never, "environment" in principal ? principal.environment : undefined);
      req.contextValues.set(principalKey, principal);
      let res: UnaryResponse<DescMessage, DescMessage> | StreamResponse<DescMessage, DescMessage>;
      if (route.idempotencyKeyRequired) {
        if (req.stream) throw apiError("internal_error", "A streaming route cannot require an Idempotency-Key.");
        // Idempotency keys are scoped by merchant and environment: only callers with a merchant take them.
        if (principal.kind !== "api_key" && principal.kind !== "site" && principal.kind !== "cashier") {
          throw apiError("internal_error", "An idempotent route must take a merchant, site or cashier credential.");
        }
        const key = checkIdempotencyKey(req.header.get("idempotency-key"));
        if (!key.ok) {
          throw key.reason === "missing"
            ? apiError("idempotency_key_required", "This request requires an Idempotency-Key header.")
            : apiError("invalid_idempotency_key", "The Idempotency-Key must be 8 to 128 characters from A-Z a-z 0-9 . _ : -");
        }
        const claim = claimFor(principal, key.key, req, o.idempotencyRetentionSeconds);
        const keyId = `${principal.merchantId}|${principal.environment}|${key.key}`;
        let written: UnaryResponse<DescMessage, DescMessage> | undefined;
        if (oneStatement.has(req.method) && !answered.has(keyId)) {
          // First without a transaction: the handler writes the key with everything else, in one
          // statement. Until that statement is sent nothing is written, so any refusal before it
          // (an invalid body, no reserved address) gets the transactional path's exact answer.
          req.contextValues.set(emKey, em);
          req.contextValues.set(claimKey, claim);
          try {
            written = (await next(req)) as UnaryResponse<DescMessage, DescMessage>;
          } catch (err) {
            if (claim.sent && !(err instanceof NeedsTransaction)) throw inProgressOnLockTimeout(err);
          } finally {
            req.contextValues.set(claimKey, undefined);
          }
        }
        res =
          written ??
          (await runIdempotent(
            em,
            principal,
            key.key,
            req,
            (tx) => {
              req.contextValues.set(emKey, tx);
              return next(req) as Promise<UnaryResponse<DescMessage, DescMessage>>;
            },
            claim,
          ));
        addBounded(answered, keyId, 10_000);
      } else {
        req.contextValues.set(emKey, em);
        res = await next(req);
      }
      if (res.stream) {
        // What fails once the stream has started is told as any failure is (an outage as one).
        const messages = res.message;
        const rpc = req.method.name;
        res = {
          ...res,
          message: (async function* () {
            try {
              yield* messages;
            } catch (err) {
              throw answerOf(err, requestId, rpc, allowOrigin);
            }
          })(),
        };
      }
      databaseOutage.recovered();
      res.header.set("x-request-id", requestId);
      if (allowOrigin) res.header.set("access-control-allow-origin", allowOrigin);
      return res;
    } catch (err) {
      throw answerOf(err, requestId, req.method.name, allowOrigin);
    }
  };
}

/** Each method's route option, read once. */
const routes = new WeakMap<DescMethod, Route | null>();
function routeOf(method: DescMethod): Route | null {
  let route = routes.get(method);
  if (route === undefined) {
    route = hasOption(method, routeOption) ? getOption(method, routeOption) : null;
    routes.set(method, route);
  }
  return route;
}

/** The {merchant} of the request must be the key's merchant. */
function checkMerchant(input: DescMessage, message: unknown, merchantId: string): void {
  const field = input.field.merchant;
  if (!field) return;
  const given = (message as Record<string, unknown>)[field.localName];
  if (given !== merchantId) {
    throw apiError("merchant_mismatch", "The merchant in the path is not the API key's merchant.", "merchant");
  }
}

/** The proto option's roles by the names credentials carry. */
const internalRoles: Partial<Record<InternalRole, RoleName>> = { [InternalRole.OBSERVE]: "observe", [InternalRole.ADMIN]: "admin" };

/** An internal credential calls only the RPCs of its roles: a chain watcher's cannot rotate a merchant's signing secret. */
function checkInternalRole(principal: InternalPrincipal, required: InternalRole): void {
  const role = internalRoles[required];
  if (role === undefined) throw apiError("insufficient_scope", "No internal credential may call this method.");
  if (!principal.roles.has(role)) throw apiError("insufficient_scope", `This internal credential lacks the "${role}" role this method requires.`);
}

/**
 * A site credential lives in a shop's pages, so anyone can copy it: a browser request (one with
 * an Origin) from an origin not on its list is refused, whatever CORS would let the page read.
 * A request without an Origin is a server's, where the credential is the merchant's own to use.
 */
function checkSiteOrigin(allowed: readonly string[], origin: string | null): string | undefined {
  if (origin === null) return undefined;
  const canonical = canonicalOrigin(origin);
  if (canonical === undefined || !allowed.includes(canonical)) {
    throw apiError("insufficient_scope", "This site credential may not be used from this page's origin; add the origin to the credential's allowed origins.");
  }
  return canonical;
}
