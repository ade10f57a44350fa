import { jetstreamManager } from "@nats-io/jetstream";
import type { Database } from "../platform/db.ts";
import type { Logger } from "../platform/logger.ts";
import type { Nats } from "../platform/nats.ts";
import { OutageLog } from "../platform/outage.ts";
import type { StreamNames } from "./jetstream.ts";
import { delayAfter, type Schedule } from "./schedule.ts";
import { failAbandoned, republishStranded } from "./webhook-deliveries.ts";

/**
 * Nothing is left behind: deliveries whose worker died during their last attempt get no
 * redelivery, so they end (failed, worker_lost); deliveries overdue past strandedAfter (their
 * message lost, or out of JetStream deliveries) are published again. Either way their old message
 * is removed from the stream. Each worker runs it (the statements lock what they change, so
 * several at once change nothing twice).
 */

function shortestDeadlineMs(s: Schedule): number {
  return Math.min(...Array.from({ length: Math.max(1, s.backoffMs.length) }, (_, i) => delayAfter(s, i + 1)));
}

/**
 * How late past its due time a delivery must be before it counts as stranded and is published
 * again: twice the first delay (10 s to 5 min), plus the attempt timeout. A retry that is merely
 * queued behind a backlog is later than that only under an extreme backlog, and then a second
 * message is harmless: the first to be claimed owns the delivery, the other is dropped.
 */
export function strandedAfter(s: Schedule, timeoutMs: number): number {
  return Math.min(Math.max(2 * shortestDeadlineMs(s), 10_000), 300_000) + timeoutMs;
}

export interface SweepOptions {
  db: Database;
  nats: Nats;
  names: StreamNames;
  schedule: Schedule;
  timeoutMs: number;
  logger: Logger;
  /** Whether the worker is stopping (a failure then is not an outage). */
  stopped: () => boolean;
}

/** Sweeps now and then (every half strandedAfter, at most 30 s) until stopped; its failures logged as an outage. */
export function startSweep(o: SweepOptions): { stop(): void } {
  const sweeping = new OutageLog(o.logger, "delivery sweep");
  const strandedAfterMs = strandedAfter(o.schedule, o.timeoutMs);
  const timer = setInterval(() => {
    void sweepOnce(o, strandedAfterMs)
      .then(() => sweeping.recovered())
      .catch((err) => {
        if (!o.stopped()) sweeping.failed(err);
      });
  }, Math.min(30_000, strandedAfterMs / 2));
  timer.unref();
  return { stop: () => clearInterval(timer) };
}

/** One pass: the abandoned end, the stranded go back to the outbox, and their old messages leave the stream. */
async function sweepOnce(o: SweepOptions, strandedAfterMs: number): Promise<void> {
  const abandoned = await failAbandoned(o.db.em.fork(), o.schedule.maxAttempts, o.timeoutMs + 60_000);
  if (abandoned.length > 0) o.logger.warn({ deliveries: abandoned.length }, "ended deliveries whose worker stopped during the last attempt");
  const stranded = await republishStranded(o.db.em.fork(), o.schedule.maxAttempts, strandedAfterMs, o.timeoutMs);
  if (stranded.length > 0) o.logger.warn({ deliveries: stranded.length }, "published again deliveries overdue for their attempt");
  const seqs = [...abandoned, ...stranded];
  if (seqs.length > 0) {
    const jsm = await jetstreamManager(await o.nats.connected);
    for (const seq of seqs) await jsm.streams.deleteMessage(o.names.stream, seq, false).catch(() => undefined);
  }
}
