import { jetstream } from "@nats-io/jetstream";
import pg from "pg";
import type { Database } from "../platform/db.ts";
import type { Logger } from "../platform/logger.ts";
import type { Nats } from "../platform/nats.ts";
import type { StreamNames } from "./jetstream.ts";
import { claimUnpublished, markPublished } from "./store.ts";

export interface RelayOptions {
  db: Database;
  databaseUrl: string;
  nats: Nats;
  names: StreamNames;
  logger: Logger;
  /** Resolves once the stream exists on the current connection; `refresh` checks again. */
  streamReady: (refresh?: boolean) => Promise<void>;
  batch?: number;
  /** A pass runs at least this often, notification or not. */
  pollMs?: number;
}

/**
 * The outbox relay: publishes every unpublished delivery to JetStream with
 * Nats-Msg-Id = delivery id, then marks it published. It wakes on the
 * webhook_outbox notification (sent when deliveries commit) and polls as a
 * fallback, so whatever a crash or a NATS outage left behind goes out on a later pass.
 * Rows are locked while published (SKIP LOCKED), so several relays share the work.
 */
export function startRelay(o: RelayOptions): { stop(): Promise<void> } {
  const batch = o.batch ?? 500;
  const pollMs = o.pollMs ?? 1000;
  let stopped = false;
  let halt!: (err: Error) => void;
  // Rejects at stop(), so nothing waits for a NATS connection that never comes.
  const halted = new Promise<never>((_, reject) => (halt = reject));
  halted.catch(() => undefined);
  let wake: (() => void) | undefined;
  let pendingWake = false;
  const poke = () => {
    pendingWake = true;
    wake?.();
  };

  // The LISTEN connection, also while it connects: stop() ends it in any state.
  let listener: pg.Client | undefined;
  const listen = async () => {
    while (!stopped) {
      const client = new pg.Client({ connectionString: o.databaseUrl });
      listener = client;
      const ended = new Promise<void>((resolve) => {
        client.on("error", () => resolve());
        client.on("end", () => resolve());
      });
      try {
        client.on("notification", poke);
        await Promise.race([client.connect(), ended]);
        if (!stopped) {
          await Promise.race([client.query("listen webhook_outbox"), ended]);
          poke();
          await ended;
        }
      } catch (err) {
        if (!stopped) o.logger.warn({ err }, "outbox relay: LISTEN connection failed; polling until it is back");
      }
      listener = undefined;
      await client.end().catch(() => undefined);
      if (!stopped) await new Promise((r) => setTimeout(r, 1000));
    }
  };
  const listening = listen();

  let failing = false;
  const pass = async (): Promise<number> => {
    const nc = await Promise.race([o.nats.connected, halted]);
    await o.streamReady(failing);
    const js = jetstream(nc);
    return o.db.em.fork().transactional(async (tx) => {
      const rows = await claimUnpublished(tx, batch);
      if (rows.length === 0) return 0;
      await Promise.all(rows.map(({ id, msgId }) => js.publish(o.names.subject, id, { msgID: msgId, timeout: 5000 })));
      await markPublished(tx, rows.map((r) => r.id));
      return rows.length;
    });
  };

  const loop = (async () => {
    while (!stopped) {
      pendingWake = false;
      try {
        let published: number;
        do published = await pass();
        while (published === batch && !stopped);
        if (failing) o.logger.info("outbox relay: publishing again");
        failing = false;
      } catch (err) {
        // Nothing is lost: the rows stay unpublished and the next pass retries them.
        if (!failing) o.logger.warn({ err }, "outbox relay: publishing failed; retrying");
        failing = true;
      }
      if (stopped) break;
      if (!pendingWake || failing) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, pollMs);
          // While publishing fails, a notification does not cut the wait short.
          if (!failing) {
            wake = () => {
              clearTimeout(timer);
              resolve();
            };
          }
        });
        wake = undefined;
      }
    }
  })();

  return {
    async stop() {
      stopped = true;
      halt(new Error("stopped"));
      wake?.();
      await listener?.end().catch(() => undefined);
      await loop;
      await listening;
    },
  };
}
