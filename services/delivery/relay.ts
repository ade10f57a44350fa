import { setTimeout as sleepFor } from "node:timers/promises";
import { jetstream, type JetStreamClient } from "@nats-io/jetstream";
import { headers } from "@nats-io/transport-node";
import type { Database } from "../platform/db.ts";
import type { Logger } from "../platform/logger.ts";
import { listenForever } from "../platform/pg-listen.ts";
import type { OutboxWake } from "./outbox-wake.ts";
import { nextDelay, OutageLog } from "../platform/outage.ts";
import type { Nats } from "../platform/nats.ts";
import { dueHeader, duplicateWindowMs, endpointHeader, eventHeader, type StreamNames } from "./jetstream.ts";
import { Lanes, type LaneShare } from "./lanes.ts";
import { markedNotClaimed, putBackUnpublished, takeUnpublished, type Unpublished } from "./webhook-deliveries.ts";

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
  /** The cap of the backoff while passes fail: how late the relay may notice the outage is over. */
  maxBackoffMs?: number;
  /** Each merchant's share of the main lane (lanes.ts). */
  laneShare?: LaneShare;
  /** Writers of this process wake the relay here after their commit, instead of by NOTIFY (outbox-wake.ts). */
  outboxWake?: OutboxWake;
}

/**
 * What a relay pass woken by a commit reads: the days of deliveries still attempted (the default
 * schedule's 14.6 hours and more), so a retry put back in the outbox goes out at once.
 */
const recentWindowMs = 3 * 86_400_000;

/** The most deliveries a relay publishes again as it starts (catchUp): a few seconds of creates flat out. */
const catchUpLimit = 5000;

/**
 * The outbox relay: marks every unpublished delivery published, then publishes it to JetStream
 * with Nats-Msg-Id = delivery id, on its merchant's lane (lanes.ts), and puts it back if the
 * publish fails. It wakes on the webhook_outbox notification (sent when deliveries commit) and
 * polls as a fallback, so whatever a NATS outage left behind goes out on a later pass, and what a
 * crash between a mark and its publish left out goes out when a relay starts (catchUp).
 * Rows are taken with SKIP LOCKED, so several relays share the work.
 * Through a database or NATS outage both loops retry with capped backoff, logging the outage
 * once when it begins and once when it ends, and resume by themselves.
 */
export function startRelay(o: RelayOptions): { stop(): Promise<void> } {
  const batch = o.batch ?? 500;
  // The newest new deliveries' pass: a quarter of the batch, so a flood's backlog goes to the other loop.
  const newestBatch = Math.ceil(batch / 4);
  const pollMs = o.pollMs ?? 1000;
  const maxBackoffMs = o.maxBackoffMs ?? 5000;
  let stopped = false;
  // Cuts backoff waits short at stop().
  const abort = new AbortController();
  const pause = (ms: number) => sleepFor(ms, undefined, { signal: abort.signal }).catch(() => undefined);
  let halt!: (err: Error) => void;
  // Rejects at stop(), so nothing waits for a NATS connection that never comes.
  const halted = new Promise<never>((_, reject) => (halt = reject));
  halted.catch(() => undefined);
  // Each loop's wake-up (below): a notification wakes both.
  const loops = new Set<LoopState>();
  const poke = (only?: "newest" | "rest") => {
    for (const l of loops) {
      if (only !== undefined && l.part !== only) continue;
      l.pendingWake = true;
      l.wake?.();
    }
  };

  // A create's wake is for its new deliveries: the newest lane's (takeUnpublished), so only the
  // newest loop runs for it. The other loop's pass (retries due, the oldest new deliveries) found
  // nothing for a create but cost a transaction of three statements per wake; it runs on its poll,
  // on a NOTIFY (the other writers of retries and recoveries send one), and as soon as a newest
  // pass comes back full (a backlog begins: its oldest are that loop's). While the newest loop
  // backs off after a failed pass (one publish timed out), the other loop takes a create's new
  // deliveries (its oldest lane), as it did before.
  const detach = o.outboxWake?.attach(() => poke([...loops].some((l) => l.part === "newest" && l.failures > 0) ? undefined : "newest"));

  // Meanwhile the LISTEN connection is down, the relay polls, so nothing waits for it.
  const listener = listenForever({
    databaseUrl: o.databaseUrl,
    channel: "webhook_outbox",
    logger: o.logger,
    what: "outbox relay LISTEN connection",
    onNotification: () => poke(),
    onListening: () => poke(),
    maxBackoffMs,
  });

  const lanes = new Lanes(o.laneShare);
  const subjects = { main: o.names.subject, backlog: o.names.backlogSubject };
  // Most passes read the recent days only; one a pollMs reads every day, for a delivery put back in
  // the outbox long after it was made (a stranded one republished).
  let everyDayAt = 0;
  /**
   * One pass of a loop: `newest` takes the newest new deliveries in one statement of their own;
   * `rest` the retries due and the oldest new deliveries (takeUnpublished's lanes). The pass
   * commits its mark before it publishes, so no row stays locked while JetStream acknowledges: a
   * delivery's claim waited for that lock. In one pass of 500 behind a backlog (the retries and
   * parked deliveries coming due), another merchant's new delivery waited for the end of the pass,
   * up to a second (the backlog bench: 0.47 s to publish, 0.75 s more to its attempt, at p99); at
   * 300 creates/s, for the publishes and the commit of the pass of a few that took it, most of the
   * time from its pick-up to its attempt (docs/performance.md). A delivery whose publish fails goes
   * back to the outbox and the pass fails (the loop backs off); one a crash cuts short between the
   * mark and the publish is the next starting relay's (catchUp) or, if no relay starts, the sweep's
   * once it is overdue (strandedAfter: with the default schedule about two minutes).
   */
  const pass = async (part: "newest" | "rest", failures: number): Promise<number> => {
    const everyDay = part === "rest" && Date.now() - everyDayAt >= pollMs;
    if (everyDay) everyDayAt = Date.now();
    const nc = await Promise.race([o.nats.connected, halted]);
    await o.streamReady(failures > 0);
    const js = jetstream(nc);
    if (part === "rest" && !caughtUp) await catchUp(js);
    const since = everyDay ? "-infinity" : new Date(Date.now() - recentWindowMs);
    // The newest lane is one statement, and needs no transaction around it (takeUnpublished).
    const rows =
      part === "newest"
        ? await takeUnpublished(o.db.em.fork(), newestBatch, since, part)
        : await o.db.em.fork().transactional((tx) => takeUnpublished(tx, batch, since, part));
    if (rows.length === 0) return 0;
    // Taken in publishing order (the retries due, then new deliveries oldest first), so a
    // merchant's share goes to its oldest.
    const sent = await Promise.allSettled(rows.map((r) => publish(js, r)));
    const failed = rows.filter((_, i) => sent[i]!.status === "rejected");
    if (failed.length === 0) return rows.length;
    await putBackUnpublished(o.db.em.fork(), failed).catch((err: unknown) => {
      o.logger.warn({ err, deliveries: failed.length }, "deliveries whose publish failed could not be put back in the outbox: the sweep publishes them again");
    });
    throw (sent.find((r) => r.status === "rejected") as PromiseRejectedResult).reason;
  };
  // Async, so that a publish that throws at once is a rejection like any other (its delivery put back).
  const publish = async (js: JetStreamClient, d: Unpublished, lane = lanes.take(d.merchantId)) =>
    js.publish(subjects[lane], d.id, { msgID: d.msgId, timeout: 5000, headers: messageHeaders(d) });
  /**
   * Once per relay, before its first pass of the other lanes: a relay that died between a pass's
   * mark and its publish left those deliveries marked and out of the stream. The latest marked
   * within the duplicate window and not claimed are published again (markedNotClaimed): JetStream
   * drops those it has, the many waiting in it for a worker. What it misses is the sweep's.
   */
  let caughtUp = false;
  const catchUp = async (js: JetStreamClient) => {
    // A minute short of the window, so that every copy JetStream holds is still in it.
    const marked = await markedNotClaimed(o.db.em.fork(), duplicateWindowMs - 60_000, catchUpLimit);
    // Once: a publish that fails here leaves its delivery to the sweep, not to a second read.
    caughtUp = true;
    // On the backlog lane, taking no merchant's share: most are copies JetStream drops, and its
    // lane tells nothing but the order of what is left (lanes.ts).
    await Promise.all(marked.map((r) => publish(js, r, "backlog")));
  };

  const loop = async (part: "newest" | "rest") => {
    const outage = new OutageLog(o.logger, `outbox relay (${part})`);
    const l: LoopState = { part, pendingWake: false, wake: undefined, failures: 0 };
    loops.add(l);
    while (!stopped) {
      l.pendingWake = false;
      try {
        let published: number;
        if (part === "rest") {
          // A pass may take fewer than the batch while more wait (its lanes: takeUnpublished): on
          // until one finds nothing.
          do published = await pass(part, l.failures);
          while (published > 0 && !stopped);
        } else {
          // The newest lane is one query: a pass that took fewer than its batch took every row
          // committed before it began that no other pass held (those are that pass's to publish),
          // and a row committed since woke this loop (pendingWake, cleared before the pass), so no
          // pass to find nothing follows it. A full pass goes on, and wakes the other loop for the
          // backlog's oldest.
          do {
            published = await pass(part, l.failures);
            if (published >= newestBatch) poke("rest");
          } while (published >= newestBatch && !stopped);
        }
        outage.recovered();
        l.failures = 0;
      } catch (err) {
        // Nothing is lost: a failed publish's rows are back in the outbox (pass), and the next pass
        // retries them; those the put-back could not reach are the sweep's.
        if (!stopped) {
          l.failures++;
          outage.failed(err);
        }
      }
      if (stopped) break;
      if (l.failures > 0) {
        // While publishing fails, a notification does not cut the wait short.
        await pause(nextDelay(l.failures, pollMs, Math.max(pollMs, maxBackoffMs)));
      } else if (!l.pendingWake) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, pollMs);
          l.wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        l.wake = undefined;
      }
    }
  };
  // Two loops, so that a new delivery never waits for a backlog's pass (pass, above).
  const running = [loop("newest"), loop("rest")];

  return {
    async stop() {
      // From now on this process's writers NOTIFY again, for the relays of other processes.
      detach?.();
      stopped = true;
      halt(new Error("stopped"));
      abort.abort();
      poke();
      await listener.stop();
      await Promise.all(running);
    },
  };
}

/** One of the relay's two loops, as its wake-ups see it. */
interface LoopState {
  part: "newest" | "rest";
  /** A wake came since the loop last began to look: it looks again before it waits. */
  pendingWake: boolean;
  /** Ends the loop's wait, while it waits. */
  wake: (() => void) | undefined;
  /** Passes failed in a row (0: the last one went through); the loop backs off while above 0. */
  failures: number;
}

/**
 * The endpoint rides on the message, so a worker shares its slots between endpoints before it
 * reads the database; the event, so that its claim reads the event in the same statement; and a
 * retry's due time, so a worker that gets it ahead of time sends it back until then without a claim.
 */
function messageHeaders({ endpointId, eventId, dueAt }: Unpublished) {
  const h = headers();
  h.set(endpointHeader, endpointId);
  h.set(eventHeader, eventId);
  if (dueAt && dueAt.getTime() > Date.now()) h.set(dueHeader, String(dueAt.getTime()));
  return h;
}
