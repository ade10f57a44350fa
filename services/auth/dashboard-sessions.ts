/**
 * A dashboard session token (dsh_…) as a caller: the merchant principal of the key it was
 * signed in with, or of the link it came from. Never cached: revoking the key, signing out and
 * the idle and absolute expiries all take effect on the very next request.
 */
import { createHmac, timingSafeEqual } from "node:crypto";
import { createContextKey } from "@connectrpc/connect";
import type { EntityManager } from "../platform/db.ts";
import { deriveKey } from "../platform/secret-key.ts";
import { hashApiKey, parseDashboardBearer } from "./keys.ts";
import type { MerchantPrincipal } from "./principal.ts";

/**
 * Set on the calls the dashboard makes for a browser, and by nothing a caller sends: the only
 * calls that take a session token. The session is the dashboard's cookie, not an API credential;
 * anywhere else it is refused as any unknown token is. In one process the dashboard sets it
 * itself; a gateway-only process's dashboard proves its calls to the rpc role with
 * dashboardCallHeader.
 */
export const dashboardCallKey = createContextKey<boolean>(false);

/** The header of a gateway-only dashboard's call: the session token's HMAC under dashboardCallSecret. */
export const dashboardCallHeader = "x-dashboard-call";

/** The key of that HMAC, from the master key every process holds (and no caller does). */
export function dashboardCallSecret(masterKey: Buffer): Buffer {
  return deriveKey(masterKey, "dashboard-call");
}

/** The proof a call with this session token carries in dashboardCallHeader. */
export function dashboardCallProof(secret: Buffer, token: string): string {
  return createHmac("sha256", secret).update(token).digest("base64url");
}

/**
 * Whether a call that came over the network is the dashboard's: its proof is its session token's
 * under one of `secrets` (the current master key's and, while the key is rotated, the previous one's).
 */
export function isProvenDashboardCall(secrets: readonly Buffer[], authorization: string | undefined, proof: string | undefined): boolean {
  const token = parseDashboardBearer(authorization ?? null);
  if (token === undefined || proof === undefined) return false;
  const given = Buffer.from(proof);
  return secrets.some((secret) => {
    const expected = Buffer.from(dashboardCallProof(secret, token));
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
}

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
  link_scopes: string[] | null;
  link_revoked_at: unknown;
  merchant_name: string | null;
  merchant_logo_url: string | null;
  merchant_brand_color: string | null;
}

export async function dashboardSessionCaller(em: EntityManager, token: string, refuse: () => never): Promise<MerchantPrincipal> {
  const [row] = await em.execute<SessionRow[]>(
    `select s.id, s.merchant_id, s.environment, s.api_key_id, s.link_id, s.read_only, s.expires_at, s.idle_seconds, s.last_seen_at, s.revoked_at,
            k.scopes as key_scopes, k.revoked_at as key_revoked_at, l.scopes as link_scopes, l.revoked_at as link_revoked_at, m.name as merchant_name,
            m.logo_url as merchant_logo_url, m.brand_color as merchant_brand_color
       from dashboard_sessions s left join api_keys k on k.id = s.api_key_id left join dashboard_links l on l.id = s.link_id
       left join merchants m on m.id = s.merchant_id
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
  // A link's session is as good as its link: revoked, it ends; it may do what the link names.
  if (row.link_id !== null && (row.link_scopes === null || row.link_revoked_at)) refuse();
  if (now - lastSeen >= touchEverySeconds * 1000) {
    await em.execute(`update dashboard_sessions set last_seen_at = now() where id = ? and revoked_at is null`, [row.id]);
  }
  const granted = row.key_scopes ?? row.link_scopes ?? [];
  return {
    kind: "api_key",
    keyId: row.api_key_id ?? row.link_id ?? row.id,
    merchantId: row.merchant_id,
    environment: row.environment === "live" ? "live" : "test",
    scopes: row.read_only ? readOnlyScopes(granted) : new Set(granted),
    session: { id: row.id, merchantName: row.merchant_name ?? "", merchantLogoUrl: row.merchant_logo_url ?? undefined, merchantBrandColor: row.merchant_brand_color ?? undefined, readOnly: row.read_only, expiresAt, idleSeconds: row.idle_seconds },
  };
}
