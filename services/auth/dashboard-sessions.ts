/**
 * A dashboard session token (dsh_…) as a caller: the merchant principal of the key it was
 * signed in with, or of the link it came from. Never cached: revoking the key, signing out and
 * the idle and absolute expiries all take effect on the very next request.
 */
import type { EntityManager } from "../platform/db.ts";
import { hashApiKey, scopes as allScopes } from "./keys.ts";
import type { MerchantPrincipal } from "./principal.ts";

/** What a read-only session keeps of its scopes: reading, never writing. */
export function readOnlyScopes(scopes: Iterable<string>): Set<string> {
  return new Set([...scopes].filter((s) => !s.endsWith(":write")));
}

/** A session's last use is written at most this often: each page is several calls. */
const touchEverySeconds = 15;

interface SessionRow {
  id: string;
  merchant_id: string;
  environment: string;
  api_key_id: string | null;
  link_id: string | null;
  read_only: boolean;
  expires_at: Date | string;
  idle_seconds: number;
  last_seen_at: Date | string;
  revoked_at: unknown;
  key_scopes: string[] | null;
  key_revoked_at: unknown;
}

export async function dashboardSessionCaller(em: EntityManager, token: string, refuse: () => never): Promise<MerchantPrincipal> {
  const [row] = await em.execute<SessionRow[]>(
    `select s.id, s.merchant_id, s.environment, s.api_key_id, s.link_id, s.read_only, s.expires_at, s.idle_seconds, s.last_seen_at, s.revoked_at,
            k.scopes as key_scopes, k.revoked_at as key_revoked_at
       from dashboard_sessions s left join api_keys k on k.id = s.api_key_id
      where s.secret_hash = ?`,
    [hashApiKey(token)],
  );
  const now = Date.now();
  if (!row || row.revoked_at) refuse();
  const expiresAt = new Date(row.expires_at);
  const lastSeen = new Date(row.last_seen_at).getTime();
  if (expiresAt.getTime() <= now || lastSeen + row.idle_seconds * 1000 <= now) refuse();
  // A key's session is exactly as good as its key, now: revoked, it ends.
  if (row.api_key_id !== null && (row.key_scopes === null || row.key_revoked_at)) refuse();
  if (now - lastSeen >= touchEverySeconds * 1000) {
    await em.execute(`update dashboard_sessions set last_seen_at = now() where id = ? and revoked_at is null`, [row.id]);
  }
  const granted = row.key_scopes ?? allScopes;
  return {
    kind: "api_key",
    keyId: row.api_key_id ?? row.link_id ?? row.id,
    merchantId: row.merchant_id,
    environment: row.environment === "live" ? "live" : "test",
    scopes: row.read_only ? readOnlyScopes(granted) : new Set(granted),
    session: { id: row.id, readOnly: row.read_only, expiresAt, idleSeconds: row.idle_seconds },
  };
}
