/**
 * Dashboard sessions and one-time links at rest: created here, resolved as callers in
 * services/auth/dashboard-sessions.ts. Tokens are returned once and kept only as hashes.
 */
import { generateDashboardLink, generateDashboardSession, hashApiKey, isDashboardLinkToken, type Environment } from "../auth/keys.ts";
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

/** Issues a one-time link to a merchant's dashboard; its token is returned once. */
export async function createDashboardLink(
  em: EntityManager,
  o: { merchantId: string; environment: Environment; readOnly: boolean; ttlSeconds: number },
): Promise<{ id: string; token: string; expiresAt: Date }> {
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
    `insert into dashboard_links (id, merchant_id, environment, secret_hash, read_only, created_at, expires_at) values (?, ?, ?, ?, ?, ?, ?)`,
    [row.id, o.merchantId, o.environment, hashApiKey(token), o.readOnly, now, row.expiresAt],
  );
  return { id: row.id, token, expiresAt: row.expiresAt };
}

/**
 * Uses a link: marked used and its session opened in one transaction, so that two tabs racing
 * with the same link get one session between them. Unknown, used and expired links are refused
 * alike.
 */
export async function exchangeDashboardLink(tx: EntityManager, token: string, lifetime: SessionLifetime): Promise<OpenedSession> {
  const refused = () => apiError("invalid_api_key", "This sign-in link is not valid: it may have been used already or have expired. Ask for a new one.");
  if (!isDashboardLinkToken(token)) throw refused();
  const [link] = await tx.execute<{ id: string; merchant_id: string; environment: string; read_only: boolean; expires_at: Date | string }[]>(
    `update dashboard_links set used_at = now() where secret_hash = ? and used_at is null and expires_at > now()
     returning id, merchant_id, environment, read_only, expires_at`,
    [hashApiKey(token)],
  );
  if (!link) throw refused();
  const environment: Environment = link.environment === "live" ? "live" : "test";
  return insertSession(tx, { merchantId: link.merchant_id, environment, apiKeyId: null, linkId: link.id, readOnly: link.read_only }, lifetime);
}

/** Signs a session out: its token is refused from now on. */
export async function endDashboardSession(em: EntityManager, sessionId: string): Promise<void> {
  await em.execute(`update dashboard_sessions set revoked_at = now() where id = ? and revoked_at is null`, [sessionId]);
}
