import type { EntityManager } from "../platform/db.ts";

/**
 * Whether this installation has Live keys in use: an API key or a site credential of Live that is
 * not revoked. Either can create Live intents (a merchant's API, the Site Gateway), so settings
 * that would price one unsafely are refused at start while one exists (services/rates/engine.ts).
 */
export async function liveKeysInUse(em: EntityManager): Promise<boolean> {
  const rows = await em.execute<{ live: boolean }[]>(
    `select exists (select 1 from api_keys where environment = 'live' and revoked_at is null)
         or exists (select 1 from site_credentials where environment = 'live' and revoked_at is null) as live`,
  );
  return rows[0]?.live === true;
}
