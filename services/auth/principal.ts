import { followedNetworks } from "../vocabulary/assets.ts";
import type { Environment, Owner } from "./keys.ts";

/**
 * Who is calling, resolved from the credential and never from the request body.
 * Each credential kind is one case here; the interceptor and the handlers switch on `kind`.
 */
export type Principal = MerchantPrincipal | SitePrincipal | CashierPrincipal | InternalPrincipal | PublicPrincipal;

/** A merchant's API key: it decides the merchant and the environment of every query. */
export interface MerchantPrincipal extends Owner {
  kind: "api_key";
  /** The key's id; a dashboard session's key, or its link's id (whose budgets it takes from). */
  keyId: string;
  scopes: ReadonlySet<string>;
  /** Set when the caller is a dashboard session (a dsh_… token) rather than the key itself. */
  session?: DashboardSessionInfo;
}

/** What a dashboard session is, beside the key or link it acts for. */
export interface DashboardSessionInfo {
  id: string;
  /** The merchant's name, read with the session (the dashboard's header shows it on every page). */
  merchantName: string;
  /** And its look (services/vocabulary/shop-look.ts), read in the same query. */
  merchantLogoUrl?: string;
  merchantBrandColor?: string;
  readOnly: boolean;
  expiresAt: Date;
  idleSeconds: number;
}

/** What an internal credential may do (the route option's internal_role). */
export type InternalRole = "observe" | "admin";

/** An internal service (the chain watcher, admin tools): no merchant of its own; its roles and environment. */
export interface InternalPrincipal {
  kind: "internal";
  credentialId: string;
  name: string;
  roles: ReadonlySet<InternalRole>;
  /** Undefined only for a credential issued before roles and environments: it holds no role and is refused everywhere. */
  environment: Environment | undefined;
  /** The networks it may speak for (internal-credential create --networks); undefined: only those no built-in watcher follows. */
  networks: ReadonlySet<string> | undefined;
}

/**
 * Whether an internal credential may speak for a network: claim its chain, report on it
 * (ChainService), record on it (ObservationService). One scoped with --networks speaks for
 * those; one created without it only for networks no built-in watcher follows (followedNetworks),
 * so that no credential made for an operator's own Solana watcher can say anything of bitcoin.
 */
export function speaksFor(principal: InternalPrincipal, network: string): boolean {
  if (principal.networks !== undefined) return principal.networks.has(network);
  return !(followedNetworks as readonly string[]).includes(network);
}

/** A merchant's web shop (Site Gateway): its merchant and environment, and the browser origins it may call from. */
export interface SitePrincipal extends Owner {
  kind: "site";
  credentialId: string;
  allowedOrigins: readonly string[];
}

/** No credential: a public route (the checkout page's data, QR configurations). */
export interface PublicPrincipal {
  kind: "public";
}

/** A cashier at a point-of-sale terminal: an expiring session of one merchant and environment. */
export interface CashierPrincipal extends Owner {
  kind: "cashier";
  sessionId: string;
  cashier: string;
  terminal: string | null;
}
