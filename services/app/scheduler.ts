import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { setTimeout as sleepFor } from "node:timers/promises";
import type { RetentionSettings } from "../platform/config.ts";
import { runRetention, RunStopped, type Removed } from "../retention/job.ts";
import { ensurePartitions } from "../retention/partitions.ts";
import { autoDisableFailing } from "../webhooks/operations.ts";
import { advanceRecoveries } from "../webhooks/recovery.ts";
import type { Intents } from "../intents/intents.ts";
import type { IntentOutputs } from "../intents/settle.ts";
import { valueDue } from "../intents/valuation.ts";
import { requoteDue } from "../intents/requote.ts";
import type { Database } from "../platform/db.ts";
import { isDatabaseUnavailable } from "../platform/errors.ts";
import type { Logger } from "../platform/logger.ts";
import { nextDelay, OutageLog } from "../platform/outage.ts";

/** The longest wait between passes while the database is down: how late the scheduler may notice it is back. */
export const schedulerMaxBackoffMs = 5000;

export interface SchedulerOptions {
  intervalMs?: number;
  /** WEBHOOK_AUTO_DISABLE_AFTER_SECONDS (default 5 days); 0: never. */
  autoDisableAfterSeconds?: number;
  /** How long after its creation a delivery may still be attempted (delivery/schedule.ts attemptSpanSeconds): what auto-disable looks back over, beyond the period. */
  attemptSpanSeconds: number;
}

/**
 * The scheduler role: expires intents every second, enqueues the next page of each running
 * recovery of missed events whose endpoint has taken most of its last one (every second), and disables endpoints where a failure ended a delivery after
 * they had only failed for autoDisableAfterSeconds (checked every minute, or more often when the
 * period is shorter than a few minutes).
 */
export function startScheduler(db: Database, logger: Logger, intents: Intents, o: SchedulerOptions): { stop(): Promise<void> } {
  const intervalMs = o.intervalMs ?? 1000;
  const autoDisableAfterSeconds = o.autoDisableAfterSeconds ?? 5 * 86_400;
  const autoDisableEveryMs = Math.min(60_000, Math.max(intervalMs, (autoDisableAfterSeconds * 1000) / 4));
  let lastAutoDisable = 0;
  return runPasses({
    logger,
    intervalMs,
    maxBackoffMs: schedulerMaxBackoffMs,
    pass: async (stopped) => {
      let expired: number;
      do {
        expired = await intents.expireDue(db.em.fork());
        if (expired > 0) logger.info({ expired }, "expired payment intents");
      } while (expired > 0 && !stopped());
      for (const r of await advanceRecoveries(db.em.fork())) {
        if (r.status === "running") continue;
        const line = { recovery: r.id, endpoint: r.endpointId, events: r.events, enqueued: r.enqueued };
        if (r.status === "done") logger.info(line, "webhook recovery done: every missed event has its delivery");
        else logger.warn(line, "webhook recovery stopped: its endpoint was disabled");
      }
      if (autoDisableAfterSeconds > 0 && Date.now() - lastAutoDisable >= autoDisableEveryMs) {
        let disabled: string[];
        do {
          disabled = await autoDisableFailing(db.em.fork(), autoDisableAfterSeconds, o.attemptSpanSeconds);
          for (const id of disabled) logger.warn({ endpoint: id, after_seconds: autoDisableAfterSeconds }, "webhook endpoint auto-disabled: every delivery failed");
        } while (disabled.length > 0 && !stopped());
        lastAutoDisable = Date.now();
      }
    },
  });
}

/**
 * The valuation sweep (intents/valuation.ts): payments of fiat-priced intents seen while no rate was
 * fresh get their value once one is, every `intervalMs` (RATE_REFRESH_SECONDS: a new rate comes no
 * more often). It runs where rates are read (the rpc role, which quotes), in as many processes as
 * run it: each intent is valued by one of them, once.
 */
export function startValuationSweep(db: Database, logger: Logger, intents: Intents, outputs: IntentOutputs, intervalMs: number): { stop(): Promise<void> } {
  const batch = 100;
  return runPasses({
    logger,
    intervalMs,
    maxBackoffMs: Math.max(schedulerMaxBackoffMs, intervalMs),
    pass: async (stopped) => {
      let pass;
      do {
        pass = await valueDue(db.em.fork(), intents, outputs, batch);
        if (pass.valued > 0) logger.info({ outputs: pass.valued, intents: pass.claimed }, "valued payments seen while no exchange rate was fresh (payment.valued)");
        // A full batch that valued nothing waits for a rate: the next pass tries again.
      } while (pass.claimed === batch && pass.valued > 0 && !stopped());
    },
  });
}

/**
 * The requote sweep (intents/requote.ts): fiat-priced intents whose quote lapsed get a new one at
 * the rate of the moment, every second (a quote lapses at its own time, and the checkout page shows
 * the lapsed one until then). It runs where rates are read (the rpc role), in as many processes as
 * run it: each lapse is re-quoted by one of them, once. An intent whose pair has no fresh rate is
 * not read: its quote stands until one is.
 */
export function startRequoteSweep(db: Database, logger: Logger, intents: Intents, outputs: IntentOutputs, intervalMs = 1000): { stop(): Promise<void> } {
  const batch = 100;
  return runPasses({
    logger,
    intervalMs,
    maxBackoffMs: schedulerMaxBackoffMs,
    pass: async (stopped) => {
      let pass;
      do {
        pass = await requoteDue(db.em.fork(), intents, outputs, batch);
        if (pass.requoted > 0) logger.info({ intents: pass.requoted }, "re-quoted fiat-priced intents whose quote lapsed (payment.requoted)");
      } while (pass.claimed === batch && pass.requoted > 0 && !stopped());
    },
  });
}

/**
 * The scheduler role's retention job (services/retention): a run at start and every
 * RETENTION_INTERVAL after, in a loop of its own so that a long run never holds up expiries. One
 * process runs at a time (the job's lease); another finds it held and waits for its next turn.
 */
export function startRetention(db: Database, logger: Logger, settings: RetentionSettings, onRun?: (removed: Removed) => void): { stop(): Promise<void> } {
  const holder = `${hostname()}-${process.pid}-${randomBytes(3).toString("hex")}`;
  return runPasses({
    logger,
    intervalMs: settings.intervalSeconds * 1000,
    maxBackoffMs: Math.max(schedulerMaxBackoffMs, settings.intervalSeconds * 1000),
    pass: async (stopped) => {
      let result;
      try {
        result = await runRetention(db.em.fork(), settings, holder, stopped);
      } catch (err) {
        if (err instanceof RunStopped) return;
        throw err;
      }
      if (!result.ran) return logger.debug({ holder: result.holder, lease_until: result.leaseUntil }, "retention: another process is running it");
      onRun?.(result.removed);
      const removed = Object.fromEntries(Object.entries(result.removed).filter(([, n]) => n > 0));
      if (Object.keys(removed).length > 0) logger.info({ removed }, "retention: removed rows past their retention");
    },
  });
}

/**
 * Keeps the webhook tables' partitions made a week ahead (services/retention/partitions.ts): at start
 * and every hour, in every process whatever its roles, since an insert of a day with no partition
 * fails, and a deployment may run no scheduler role for a while.
 */
export function startPartitionKeeper(db: Database, logger: Logger): { stop(): Promise<void> } {
  return runPasses({
    logger,
    intervalMs: 3_600_000,
    maxBackoffMs: schedulerMaxBackoffMs,
    pass: async () => {
      const made = await ensurePartitions(db.em.fork());
      if (made.length > 0) logger.info({ partitions: made }, "partitions: made the days ahead");
    },
  });
}

export interface PassesOptions {
  /** One pass; `stopped()` says whether to cut a long pass short. */
  pass: (stopped: () => boolean) => Promise<void>;
  logger: Logger;
  intervalMs: number;
  /** The cap of the backoff after failed passes. */
  maxBackoffMs: number;
  /** Tests give a fake clock and sleep; the defaults are the real ones. */
  now?: () => number;
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
}

/**
 * Runs `pass` every intervalMs until stopped. While passes fail the wait backs off (doubling,
 * capped), so an outage is retried without end and the loop resumes by itself. A database outage
 * is logged once when it begins and once when it ends; any other failure is a bug and is
 * logged as an error each time (at most once per backoff).
 */
export function runPasses(o: PassesOptions): { stop(): Promise<void> } {
  const sleep = o.sleep ?? ((ms, signal) => sleepFor(ms, undefined, { signal }).catch(() => undefined));
  const outage = new OutageLog(o.logger, "database", o.now);
  const abort = new AbortController();
  let stopped = false;
  let failures = 0;
  const loop = (async () => {
    while (!stopped) {
      try {
        await o.pass(() => stopped);
        outage.recovered();
        failures = 0;
      } catch (err) {
        failures++;
        if (stopped) break;
        if (isDatabaseUnavailable(err)) outage.failed(err);
        else o.logger.error({ err }, "scheduler pass failed");
      }
      if (stopped) break;
      await sleep(failures > 0 ? nextDelay(failures, o.intervalMs, o.maxBackoffMs) : o.intervalMs, abort.signal);
    }
  })();
  return {
    async stop() {
      stopped = true;
      abort.abort();
      await loop;
    },
  };
}
