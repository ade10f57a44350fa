/**
 * Dashboard sessions and one-time links at rest: created here, resolved as callers in
 * services/auth/dashboard-sessions.ts. Tokens are returned once and kept only as hashes.
 */
import { generateDashboardLink, generateDashboardSession, hashApiKey, isDashboardLinkToken, isScope, scopes as allScopes, type Environment, type Scope } from "../auth/keys.ts";
import type { EntityManager } from "../platform/db.ts";
import { apiError } from "../platform/errors.ts";
import { newId } from "../platform/ids.ts";

/** How long a session lasts: idle, and at most (DASHBOARD_SESSION_IDLE_MINUTES, DASHBOARD_SESSION_MAX_HOURS). */
export interface SessionLifetime {
  idleSeconds: number;
  maxSeconds: number;
}

/** A one-time link's lifetime: a minute to a week, a day when not given. */
export const linkTtlSeconds = { min: 60, max: 7 * 86_400, default: 86_400 } as const;

export interface OpenedSession {
  token: string;
  merchantId: string;
  environment: Environment;
  readOnly: boolean;
  expiresAt: Date;
  idleSeconds: number;
  /** A link's session: the scopes its link names (a key's session has its key's). */
  scopes?: string[];
}

async function insertSession(
  em: EntityManager,
  o: { merchantId: string; environment: Environment; apiKeyId: string | null; linkId: string | null; readOnly: boolean },
  lifetime: SessionLifetime,
): Promise<OpenedSession> {
  const token = generateDashboardSession(o.environment);
  const now = new Date();
  const expiresAt = new Date(now.getTime() + lifetime.maxSeconds * 1000);
  await em.execute(
    `insert into dashboard_sessions (id, merchant_id, environment, secret_hash, api_key_id, link_id, read_only, created_at, last_seen_at, idle_seconds, expires_at)
     values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [newId("dss"), o.merchantId, o.environment, hashApiKey(token), o.apiKeyId, o.linkId, o.readOnly, now, now, lifetime.idleSeconds, expiresAt],
  );
  return { token, merchantId: o.merchantId, environment: o.environment, readOnly: o.readOnly, expiresAt, idleSeconds: lifetime.idleSeconds };
}

/** A session signed in with an API key: it lives only as long as the key does. */
export function openKeySession(em: EntityManager, key: { keyId: string; merchantId: string; environment: Environment }, lifetime: SessionLifetime): Promise<OpenedSession> {
  return insertSession(em, { merchantId: key.merchantId, environment: key.environment, apiKeyId: key.keyId, linkId: null, readOnly: false }, lifetime);
}

/** What a link's session may do when its issuer names nothing: read, never write. */
export const defaultLinkScopes: readonly Scope[] = ["payment_intents:read", "webhooks:read", "merchant:readiness"];

/** Issues a one-time link to a merchant's dashboard, its session limited to `scopes`; its token is returned once. */
export async function createDashboardLink(
  em: EntityManager,
  o: { merchantId: string; environment: Environment; readOnly: boolean; ttlSeconds: number; scopes: readonly string[] },
): Promise<{ id: string; token: string; expiresAt: Date; scopes: Scope[] }> {
  const unknown = o.scopes.find((s) => !isScope(s));
  if (unknown !== undefined) throw apiError("validation_failed", `Unknown scope "${unknown}": one of ${allScopes.join(", ")}.`, "scopes");
  const scopes = o.scopes.length === 0 ? [...defaultLinkScopes] : ([...new Set(o.scopes)] as Scope[]);
  const ttl = o.ttlSeconds === 0 ? linkTtlSeconds.default : o.ttlSeconds;
  if (ttl < linkTtlSeconds.min || ttl > linkTtlSeconds.max) {
    throw apiError("validation_failed", `ttl_seconds must be from ${linkTtlSeconds.min} to ${linkTtlSeconds.max}.`, "ttl_seconds");
  }
  const [merchant] = await em.execute<{ id: string }[]>(`select id from merchants where id = ?`, [o.merchantId]);
  if (!merchant) throw apiError("not_found", `No merchant ${o.merchantId}.`, "merchant");
  const token = generateDashboardLink();
  const now = new Date();
  const row = { id: newId("dlk"), expiresAt: new Date(now.getTime() + ttl * 1000) };
  await em.execute(
    `insert into dashboard_links (id, merchant_id, environment, secret_hash, read_only, scopes, created_at, expires_at) values (?, ?, ?, ?, ?, ?::text[], ?, ?)`,
    [row.id, o.merchantId, o.environment, hashApiKey(token), o.readOnly, `{${scopes.join(",")}}`, now, row.expiresAt],
  );
  return { id: row.id, token, expiresAt: row.expiresAt, scopes };
}

/** Where a link signs in: its token in the fragment, which no server, proxy or log on the way sees. */
export function dashboardLinkUrl(dashboardBaseUrl: string, token: string): string {
  return `${dashboardBaseUrl.replace(/\/+$/, "")}/link#token=${token}`;
}

/** Revokes a link: unused, it can no longer be; used, its session ends at its next request. */
export async function revokeDashboardLink(em: EntityManager, linkId: string): Promise<{ id: string; merchant: string; revoked_at: string }> {
  const [row] = await em.execute<{ id: string; merchant_id: string; revoked_at: Date | string }[]>(
    `update dashboard_links set revoked_at = coalesce(revoked_at, now()) where id = ? returning id, merchant_id, revoked_at`,
    [linkId],
  );
  if (!row) throw apiError("not_found", `No dashboard link ${linkId}.`, "id");
  return { id: row.id, merchant: row.merchant_id, revoked_at: new Date(row.revoked_at).toISOString() };
}

export interface SessionListing {
  id: string;
  environment: string;
  /** What it was signed in with: "api_key" (key_id) or "link" (link_id). */
  via: "api_key" | "link";
  key_id: string | null;
  link_id: string | null;
  read_only: boolean;
  created_at: string;
  last_seen_at: string;
  expires_at: string;
}

/** A merchant's sessions still open (not signed out, revoked or past their absolute expiry), newest first. */
export async function listDashboardSessions(em: EntityManager, merchantId: string): Promise<SessionListing[]> {
  const rows = await em.execute<{ id: string; environment: string; api_key_id: string | null; link_id: string | null; read_only: boolean; created_at: Date | string; last_seen_at: Date | string; expires_at: Date | string }[]>(
    `select id, environment, api_key_id, link_id, read_only, created_at, last_seen_at, expires_at from dashboard_sessions
      where merchant_id = ? and revoked_at is null and expires_at > now() order by created_at desc, id desc`,
    [merchantId],
  );
  const iso = (v: Date | string) => new Date(v).toISOString();
  return rows.map((r) => ({
    id: r.id,
    environment: r.environment,
    via: r.api_key_id !== null ? "api_key" : "link",
    key_id: r.api_key_id,
    link_id: r.link_id,
    read_only: r.read_only,
    created_at: iso(r.created_at),
    last_seen_at: iso(r.last_seen_at),
    expires_at: iso(r.expires_at),
  }));
}

/** Ends a merchant's sessions (one, by id, or all): each is refused from its next request. */
export async function revokeDashboardSessions(em: EntityManager, merchantId: string, sessionId?: string): Promise<{ merchant: string; revoked: string[] }> {
  const rows = await em.execute<{ id: string }[]>(
    `update dashboard_sessions set revoked_at = now() where merchant_id = ? and revoked_at is null ${sessionId === undefined ? "" : "and id = ?"} returning id`,
    sessionId === undefined ? [merchantId] : [merchantId, sessionId],
  );
  if (sessionId !== undefined && rows.length === 0) throw apiError("not_found", `No open dashboard session ${sessionId} of merchant ${merchantId}.`, "id");
  return { merchant: merchantId, revoked: rows.map((r) => r.id).sort() };
}

/**
 * Uses a link: marked used and its session opened in one transaction, so that two tabs racing
 * with the same link get one session between them. Unknown, used and expired links are refused
 * alike.
 */
export async function exchangeDashboardLink(tx: EntityManager, token: string, lifetime: SessionLifetime): Promise<OpenedSession> {
  const refused = () => apiError("invalid_api_key", "This sign-in link is not valid: it may have been used already or have expired. Ask for a new one.");
  if (!isDashboardLinkToken(token)) throw refused();
  const [link] = await tx.execute<{ id: string; merchant_id: string; environment: string; read_only: boolean; scopes: string[]; expires_at: Date | string }[]>(
    `update dashboard_links set used_at = now() where secret_hash = ? and used_at is null and revoked_at is null and expires_at > now()
     returning id, merchant_id, environment, read_only, scopes, expires_at`,
    [hashApiKey(token)],
  );
  if (!link) throw refused();
  const environment: Environment = link.environment === "live" ? "live" : "test";
  const opened = await insertSession(tx, { merchantId: link.merchant_id, environment, apiKeyId: null, linkId: link.id, readOnly: link.read_only }, lifetime);
  return { ...opened, scopes: link.scopes };
}

/** Signs a session out: its token is refused from now on. */
export async function endDashboardSession(em: EntityManager, sessionId: string): Promise<void> {
  await em.execute(`update dashboard_sessions set revoked_at = now() where id = ? and revoked_at is null`, [sessionId]);
}
