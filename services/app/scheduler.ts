import { purgeExpiredKeys } from "../idempotency/idempotent.ts";
import type { Intents } from "../intents/intents.ts";
import type { Database } from "../platform/db.ts";
import type { Logger } from "../platform/logger.ts";

/** The scheduler role: expires intents every second, purges old idempotency keys every hour. */
export function startScheduler(db: Database, logger: Logger, intents: Intents, intervalMs = 1000): { stop(): Promise<void> } {
  let stopped = false;
  let lastPurge = 0;
  const loop = (async () => {
    while (!stopped) {
      try {
        let expired: number;
        do {
          expired = await intents.expireDue(db.em.fork());
          if (expired > 0) logger.info({ expired }, "expired payment intents");
        } while (expired > 0 && !stopped);
        if (Date.now() - lastPurge > 3_600_000) {
          const purged = await purgeExpiredKeys(db.em.fork());
          lastPurge = Date.now();
          if (purged > 0) logger.info({ purged }, "purged idempotency keys past retention");
        }
      } catch (err) {
        if (!stopped) logger.error({ err }, "scheduler pass failed");
      }
      await new Promise((r) => setTimeout(r, intervalMs));
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
    },
  };
}
