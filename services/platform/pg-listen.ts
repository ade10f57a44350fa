import { setTimeout as sleepFor } from "node:timers/promises";
import pg from "pg";
import type { Logger } from "./logger.ts";
import { nextDelay, OutageLog } from "./outage.ts";

export interface ListenOptions {
  databaseUrl: string;
  channel: string;
  logger: Logger;
  /** Names the connection in the outage log lines. */
  what: string;
  onNotification: (payload: string | undefined) => void;
  /** Called each time LISTEN is in place (again): notifications sent before it were missed. */
  onListening?: () => void;
  /** Called when the connection is lost: notifications may be missed until onListening. */
  onLost?: () => void;
  maxBackoffMs?: number;
}

/**
 * A PostgreSQL LISTEN on its own connection, reconnected with capped backoff for as long as it
 * runs; an outage is logged once when it begins and once when it ends. Callers learn when
 * notifications may have been missed (onLost … onListening), since PostgreSQL keeps none for a
 * listener that is not connected.
 */
export function listenForever(o: ListenOptions): { stop(): Promise<void> } {
  const maxBackoffMs = o.maxBackoffMs ?? 5000;
  const abort = new AbortController();
  const pause = (ms: number) => sleepFor(ms, undefined, { signal: abort.signal }).catch(() => undefined);
  const outage = new OutageLog(o.logger, o.what);
  let stopped = false;
  // The connection, also while it connects: stop() ends it in any state.
  let client: pg.Client | undefined;

  const loop = (async () => {
    let failures = 0;
    while (!stopped) {
      const current = new pg.Client({ connectionString: o.databaseUrl });
      client = current;
      // Rejects when the connection breaks or ends, so a lost connection counts as a failure.
      const ended = new Promise<never>((_, reject) => {
        current.on("error", reject);
        current.on("end", () => reject(new Error("the LISTEN connection ended")));
      });
      ended.catch(() => undefined);
      let listening = false;
      try {
        current.on("notification", (n) => o.onNotification(n.payload));
        await Promise.race([current.connect(), ended]);
        if (!stopped) {
          await Promise.race([current.query(`listen ${pg.escapeIdentifier(o.channel)}`), ended]);
          listening = true;
          outage.recovered();
          failures = 0;
          o.onListening?.();
          await ended;
        }
      } catch (err) {
        if (!stopped) {
          failures++;
          outage.failed(err);
        }
      }
      if (listening) o.onLost?.();
      client = undefined;
      await current.end().catch(() => undefined);
      if (!stopped) await pause(nextDelay(Math.max(failures, 1), 1000, maxBackoffMs));
    }
  })();

  return {
    async stop() {
      stopped = true;
      abort.abort();
      await client?.end().catch(() => undefined);
      await loop;
    },
  };
}
