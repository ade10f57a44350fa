import type { Owner } from "./keys.ts";

/**
 * Who is calling, resolved from the credential and never from the request body.
 * Each credential kind is one case here; the interceptor and the handlers switch on `kind`.
 */
export type Principal = MerchantPrincipal | InternalPrincipal;

/** A merchant's API key: it decides the merchant and the environment of every query. */
export interface MerchantPrincipal extends Owner {
  kind: "api_key";
  keyId: string;
  scopes: ReadonlySet<string>;
}

/** An internal service (the chain watcher, admin tools): no merchant of its own. */
export interface InternalPrincipal {
  kind: "internal";
  credentialId: string;
  name: string;
}
