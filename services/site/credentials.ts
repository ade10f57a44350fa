import { AdminError } from "../auth/admin.ts";
import { SiteCredential, Merchant } from "../auth/entities.ts";
import { canonicalOrigin, generateSiteCredential, hashApiKey, keyHint, type Environment } from "../auth/keys.ts";
import type { EntityManager } from "../platform/db.ts";
import { newId } from "../platform/ids.ts";

/** Issuance and revocation of Site Gateway credentials (admin CLI), and the CORS lookup. */

/** Canonical origins, or an AdminError naming the first that is not one. */
export function checkOrigins(origins: readonly string[]): string[] {
  return [
    ...new Set(
      origins.map((o) => {
        const canonical = canonicalOrigin(o.trim());
        if (!canonical) throw new AdminError(`--allowed-origin must be a browser origin such as https://shop.example (scheme, host, port), got "${o}"`);
        return canonical;
      }),
    ),
  ];
}

export async function createSiteCredential(em: EntityManager, merchantId: string, environment: Environment, allowedOrigins: readonly string[]) {
  const merchant = await em.findOne(Merchant, { id: merchantId });
  if (!merchant) throw new AdminError(`no merchant ${merchantId}`);
  const origins = checkOrigins(allowedOrigins);
  const secret = generateSiteCredential(environment);
  const row = {
    id: newId("sc"),
    merchant: merchantId,
    environment,
    secretHash: hashApiKey(secret),
    hint: keyHint(secret),
    allowedOrigins: origins,
    createdAt: new Date(),
    revokedAt: null,
  };
  await em.insert(SiteCredential, row);
  return { id: row.id, merchant: merchantId, environment, credential: secret, allowed_origins: origins, created_at: row.createdAt.toISOString() };
}

export async function revokeSiteCredential(em: EntityManager, id: string) {
  const row = await em.findOne(SiteCredential, { id });
  if (!row) throw new AdminError(`no site credential ${id}`);
  const revokedAt = row.revokedAt ?? new Date();
  if (!row.revokedAt) await em.nativeUpdate(SiteCredential, { id }, { revokedAt });
  return { id, hint: row.hint, revoked_at: revokedAt.toISOString() };
}

/** Whether an active site credential allows this (canonical) origin: CORS preflights carry no credential. */
export async function originAllowedByAnySite(em: EntityManager, origin: string): Promise<boolean> {
  const rows = await em.execute<{ n: number }[]>(
    `select 1 as n from site_credentials where revoked_at is null and ? = any(allowed_origins) limit 1`,
    [origin],
  );
  return rows.length > 0;
}

/** A merchant's site credentials, newest first: hints only, never the secret. */
export async function listSiteCredentials(em: EntityManager, merchantId: string) {
  const merchant = await em.findOne(Merchant, { id: merchantId });
  if (!merchant) throw new AdminError(`no merchant ${merchantId}`);
  const rows = await em.find(SiteCredential, { merchant: merchantId }, { orderBy: { createdAt: "desc" } });
  return rows.map((c) => ({
    id: c.id,
    environment: c.environment,
    hint: c.hint,
    allowed_origins: c.allowedOrigins,
    created_at: c.createdAt.toISOString(),
    revoked_at: c.revokedAt?.toISOString() ?? null,
  }));
}
