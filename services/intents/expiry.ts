import type { EntityManager } from "../platform/db.ts";
import { claimDueIntents } from "./store.ts";
import { transition } from "./transition.ts";

/**
 * Expires due intents, a batch per transaction. Rows are claimed with
 * SKIP LOCKED, so any number of schedulers can run side by side.
 */
export async function expireDueIntents(em: EntityManager, checkoutBaseUrl: string, batch = 100): Promise<number> {
  return em.transactional(async (tx) => {
    const rows = await claimDueIntents(tx, batch);
    const now = new Date();
    for (const row of rows) await transition(tx, row, "expired", checkoutBaseUrl, now);
    return rows.length;
  });
}
