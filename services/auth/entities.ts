import { defineEntity, p, type InferEntity } from "@mikro-orm/core";

/**
 * Every change to a credential row (a revocation, a deletion with its merchant) is announced on
 * credential_changed with the row's secret hash, at commit: each process's cache of verified
 * credentials drops it (services/auth/credential-cache.ts). A trigger, so that no code path,
 * CLI or hand-written SQL can revoke without telling them.
 */
const credentialChanged = (table: string) => ({
  name: `${table}_credential_changed`,
  timing: "after" as const,
  events: ["update" as const, "delete" as const],
  forEach: "row" as const,
  body: "perform pg_notify('credential_changed', old.secret_hash); return null;",
});

export const Merchant = defineEntity({
  name: "Merchant",
  tableName: "merchants",
  properties: {
    id: p.string().primary(),
    name: p.string().length(200),
    createdAt: p.datetime().length(3),
    // The shop's look (services/vocabulary/shop-look.ts): an https logo URL and a #rrggbb colour.
    logoUrl: p.string().length(2048).nullable(),
    brandColor: p.string().length(7).nullable(),
  },
});
export type Merchant = InferEntity<typeof Merchant>;

/** An API key: only its SHA-256 hash is stored. The key decides merchant and environment. */
export const ApiKey = defineEntity({
  name: "ApiKey",
  tableName: "api_keys",
  triggers: [credentialChanged("api_keys")],
  properties: {
    id: p.string().primary(),
    merchant: () => p.manyToOne(Merchant).deleteRule("cascade"),
    environment: p.string().length(4),
    secretHash: p.string().length(64).unique(),
    hint: p.string().length(16),
    scopes: p.array(),
    createdAt: p.datetime().length(3),
    revokedAt: p.datetime().length(3).nullable(),
  },
});
export type ApiKey = InferEntity<typeof ApiKey>;

/**
 * When each API key last authenticated a call, written only by services/auth/key-last-use.ts: at
 * most once a minute per key and process, after the call, never on its path. A table of its own
 * rather than a column of api_keys: every update of an api_keys row tells every process to drop
 * the key from its credential cache (credential_changed), and last use must not.
 */
export const ApiKeyLastUse = defineEntity({
  name: "ApiKeyLastUse",
  tableName: "api_key_last_uses",
  properties: {
    apiKey: () => p.manyToOne(ApiKey).primary().deleteRule("cascade"),
    lastUsedAt: p.datetime().length(3),
  },
});
export type ApiKeyLastUse = InferEntity<typeof ApiKeyLastUse>;

/** A credential of an internal service (the chain watcher, admin tools): hashed like an API key, no merchant. */
export const InternalCredential = defineEntity({
  name: "InternalCredential",
  tableName: "internal_credentials",
  triggers: [credentialChanged("internal_credentials")],
  properties: {
    id: p.string().primary(),
    name: p.string().length(200),
    secretHash: p.string().length(64).unique(),
    hint: p.string().length(16),
    /** What it may call, by the route option's internal_role: "observe" (chain facts), "admin" (operator actions). */
    roles: p.array().columnType("text[]").default([]),
    /**
     * The environment it acts in; null only for credentials issued before roles and environments:
     * those hold no role since Migration20261127233000_ChainSpeakers, and must be issued anew.
     */
    environment: p.string().length(8).nullable(),
    /**
     * The networks an observe credential may speak for (claim, report, record on): null, one
     * created without --networks, speaks only for networks no built-in watcher follows
     * (services/auth/principal.ts speaksFor).
     */
    networks: p.array().columnType("text[]").nullable(),
    createdAt: p.datetime().length(3),
    revokedAt: p.datetime().length(3).nullable(),
    /**
     * Refused from this moment on; null: never (those an operator creates). A watcher beside the
     * rpc role gets one of its own that expires within minutes and is renewed while its process runs.
     */
    expiresAt: p.datetime().length(3).nullable(),
  },
});
export type InternalCredential = InferEntity<typeof InternalCredential>;

/** A Site Gateway credential: a merchant's web shop. Hashed like an API key; CORS only for its allowed origins. */
export const SiteCredential = defineEntity({
  name: "SiteCredential",
  tableName: "site_credentials",
  triggers: [credentialChanged("site_credentials")],
  properties: {
    id: p.string().primary(),
    merchant: () => p.manyToOne(Merchant).deleteRule("cascade"),
    environment: p.string().length(4),
    secretHash: p.string().length(64).unique(),
    hint: p.string().length(20),
    allowedOrigins: p.array(),
    createdAt: p.datetime().length(3),
    revokedAt: p.datetime().length(3).nullable(),
  },
});
export type SiteCredential = InferEntity<typeof SiteCredential>;

/** A cashier session (point-of-sale terminal): hashed like an API key, expires, revocable. */
export const CashierSession = defineEntity({
  name: "CashierSession",
  tableName: "cashier_sessions",
  properties: {
    id: p.string().primary(),
    merchant: () => p.manyToOne(Merchant).deleteRule("cascade"),
    environment: p.string().length(4),
    cashier: p.string().length(100),
    terminal: p.string().length(100).nullable(),
    secretHash: p.string().length(64).unique(),
    hint: p.string().length(20),
    createdAt: p.datetime().length(3),
    expiresAt: p.datetime().length(3),
    revokedAt: p.datetime().length(3).nullable(),
  },
  indexes: [{ properties: ["merchant", "createdAt"] }],
  triggers: [credentialChanged("cashier_sessions")],
});
export type CashierSession = InferEntity<typeof CashierSession>;

/**
 * A merchant dashboard session (DASHBOARD_BASE_URL): the browser holds its token in a cookie, the
 * table only its hash. Bound to the API key it was signed in with (the key's scopes, and the key's
 * revocation ends it at once: checked on every request), or to the one-time link it came from.
 * It ends at expiresAt, or after idleSeconds unused.
 */
export const DashboardSession = defineEntity({
  name: "DashboardSession",
  tableName: "dashboard_sessions",
  properties: {
    id: p.string().primary(),
    merchant: () => p.manyToOne(Merchant).deleteRule("cascade"),
    environment: p.string().length(4),
    secretHash: p.string().length(64).unique(),
    apiKey: () => p.manyToOne(ApiKey).deleteRule("cascade").nullable(),
    link: () => p.manyToOne(DashboardLink).deleteRule("cascade").nullable(),
    readOnly: p.boolean().default(false),
    createdAt: p.datetime().length(3),
    lastSeenAt: p.datetime().length(3),
    idleSeconds: p.integer(),
    expiresAt: p.datetime().length(3),
    revokedAt: p.datetime().length(3).nullable(),
  },
});
export type DashboardSession = InferEntity<typeof DashboardSession>;

/**
 * A one-time dashboard sign-in link an operator issued (admin dashboard-link, AdminService.CreateDashboardLink):
 * its token's hash, usable once, and the scopes its session gets. Revoked, its session ends.
 */
export const DashboardLink = defineEntity({
  name: "DashboardLink",
  tableName: "dashboard_links",
  properties: {
    id: p.string().primary(),
    merchant: () => p.manyToOne(Merchant).deleteRule("cascade"),
    environment: p.string().length(4),
    secretHash: p.string().length(64).unique(),
    readOnly: p.boolean().default(false),
    scopes: p.array(),
    createdAt: p.datetime().length(3),
    expiresAt: p.datetime().length(3),
    usedAt: p.datetime().length(3).nullable(),
    revokedAt: p.datetime().length(3).nullable(),
  },
});
export type DashboardLink = InferEntity<typeof DashboardLink>;
