import type https from "node:https";
import { jetstream, jetstreamManager, type JsMsg } from "@nats-io/jetstream";
import type { Database } from "../platform/db.ts";
import { isDatabaseUnavailable, isTransientConflict } from "../platform/errors.ts";
import type { Logger } from "../platform/logger.ts";
import type { Nats } from "../platform/nats.ts";
import { OutageLog, nextDelay } from "../platform/outage.ts";
import { SecretUnreadable, type SecretBox } from "../webhooks/secrets.ts";
import { Batcher } from "./batcher.ts";
import { storableText } from "./excerpt.ts";
import { classify, type AttemptResult, type Outcome } from "./classify.ts";
import { dueHeader, endpointHeader, type StreamNames } from "./jetstream.ts";
import { delayAfter, nakDelayFor, nakReaches, type Schedule } from "./schedule.ts";
import { EndpointGate, type Attempt, type Ending, type FairnessSettings } from "./fairness.ts";
import { endSlots, takeSlots, type SlotAnswer, type SlotEnd, type SlotRequest } from "./shared-gate.ts";
import { deliveryAgent, send, type Response } from "./send.ts";
import { signatureHeaders } from "./signature.ts";
import { WaitingRetries } from "./waiting-retries.ts";
import {
  claimDeliveries,
  failAbandoned,
  failClaimed,
  finishAttempts,
  giveUpAttempt,
  recordLostAttempt,
  requeueHeldBack,
  republishStranded,
  requeue,
  type AttemptRecord,
  type Claimed,
  type ClaimRequest,
  type ClaimResult,
  earlyToleranceMs,
} from "./store.ts";
import type { ConnectTo } from "../platform/connect-to.ts";
import { PolicyRejection, UnresolvedHost, resolveTarget } from "../webhooks/url-policy.ts";

export interface WorkerOptions {
  db: Database;
  nats: Nats;
  names: StreamNames;
  schedule: Schedule;
  secrets: SecretBox;
  connectTo: readonly ConnectTo[];
  timeoutMs: number;
  concurrency: number;
  /** How the worker shares its attempts between endpoints (see fairness.ts); its slots are `concurrency`. */
  fairness: Omit<FairnessSettings, "total">;
  /** How long a stop waits for attempts in flight before it records them as lost (default stopGraceMs). */
  stopGraceMs?: number;
  /**
   * WEBHOOK_STREAM_WAIT_SECONDS, in ms: a retry due later than this waits in the outbox, not in
   * JetStream; and WEBHOOK_ENDPOINT_STREAM_RETRIES: the retries of one endpoint this worker leaves
   * waiting in JetStream at once (waiting-retries.ts).
   */
  streamWaitMs: number;
  endpointStreamRetries: number;
  logger: Logger;
  /** Resolves once the stream and consumer exist on the current connection; `refresh` checks again. */
  streamReady: (refresh?: boolean) => Promise<void>;
  /** Told of each attempt whose outcome this worker recorded (metrics). */
  onAttempt?: (a: { number: number; startedAt: Date; result: AttemptResult; outcome: Outcome; eventCreatedAt: Date }) => void;
}

export const userAgent = "PaymentIntentService-Webhooks/1.0";

/**
 * How long a stopping worker waits for its attempts in flight. The app's whole stop has 15 s;
 * an attempt still running after this is recorded as lost rather than left in processing.
 */
export const stopGraceMs = 5000;

/**
 * An attempt whose request has not gone out this long after its claim never sends it (a worker
 * that stalled, a database outage while it recorded a lost attempt, a slow DNS answer): it is
 * recorded as lost and retried on schedule. So an attempt is over, whatever became of its worker,
 * by its claim + this + the request's timeout. The worker counts it on its own monotonic clock
 * from just before it sent the claim (Claimed.claimSentAt), so however its wall clock is set, it
 * never sends later than this after the claim the database recorded.
 */
export const sendWithinMs = 5000;

/**
 * A request is over a moment after its timeout fires (later on a busy event loop). Not for
 * workers' clocks: the claim and the takeover are measured on the database's clock
 * (store.ts claimDeliveries), and each worker's deadlines on its own monotonic clock.
 */
const takeoverMarginMs = 2000;

/**
 * How long after its claim an attempt can no longer be running, so that another copy of its
 * message may take the delivery over (its worker died or stalled): a copy that comes sooner waits,
 * and the webhook is never POSTed twice at once. 17 s with the default 10 s timeout, by the
 * database's clock, whatever the workers' clocks say.
 */
export function takeoverAfter(timeoutMs: number): number {
  return sendWithinMs + timeoutMs + takeoverMarginMs;
}

/**
 * How long an endpoint's shared slot (shared-gate.ts) is held at most: taken before the claim, so
 * the claim may take a while (a database that answers slowly); an attempt whose request could not
 * be over within it does not send (sendBy), so a lapsed lease never has an attempt running.
 */
export function slotLeaseMs(timeoutMs: number): number {
  return slotClaimAllowanceMs + sendWithinMs + timeoutMs + takeoverMarginMs;
}
const slotClaimAllowanceMs = 30_000;

/** What a running worker shows to metrics. */
export interface WorkerStats {
  /** Attempts in flight per endpoint id. */
  inFlight(): Map<string, number>;
  /** Messages held in this worker for an endpoint's free slot. */
  held(): number;
  /** Endpoints whose circuit is open. */
  openCircuits(): number;
  /** Messages sent back to JetStream (or the outbox) because their endpoint had no free slot, since start. */
  heldBackTotal(): number;
}

/**
 * A delivery worker: pulls from the shared durable consumer and makes one
 * attempt per message. The retry schedule is JetStream's backoff: success → ack;
 * retryable → a NAK whose delay makes the server redeliver after backoff[n-1] from
 * now, exactly as if the message had been left unacknowledged, but which also re-arms
 * the consumer's redelivery timer (on 2.9 a message left alone waits for a timer armed
 * for another message's longer backoff: nats-server #6085); terminal or the last
 * attempt → a bare term() (2.9 ignores a term with a reason). While an attempt runs,
 * working() keeps its ack deadline from passing, so it is never redelivered in flight;
 * if this process dies, the deadline passes and another worker takes the delivery over.
 * When the database cannot be reached, the message is held (working()) and the write
 * retried (capped backoff, the outage logged once as it begins and once as it ends), so an
 * outage spends neither an attempt nor a JetStream delivery, and an attempt's outcome is saved
 * as it was once the database is back. When the consumer's leader is lost (a server of a
 * cluster dies) or the connection moves to another server, the pull loop starts over.
 */
export function startDeliveryWorker(o: WorkerOptions): WorkerStats & { stop(): Promise<void> } {
  let stopped = false;
  let halt!: (err: Error) => void;
  // Rejects at stop(), so nothing waits for a NATS connection that never comes.
  const halted = new Promise<never>((_, reject) => (halt = reject));
  halted.catch(() => undefined);
  /** A wait that stop() cuts short. */
  const pause = (ms: number) => Promise.race([new Promise((r) => setTimeout(r, ms)), halted]).catch(() => undefined);
  let current: { close(): Promise<void | Error> } | undefined;
  const inflight = new Set<Promise<void>>();
  // Another copy of a message takes its delivery over only once the attempt can no longer be running.
  const takeoverAfterMs = takeoverAfter(o.timeoutMs);
  // A batch the database refuses while it is up is one item's fault: each item is written alone.
  const isolate = (err: unknown) => !isDatabaseUnavailable(err);
  const batches: Batches = {
    claims: new Batcher((items) => claimDeliveries(o.db.em.fork(), items, new Date(), takeoverAfterMs), { isolate }),
    finishes: new Batcher((items) => finishAttempts(o.db.em.fork(), items), { isolate }),
    heldBack: new Batcher((items) => requeueHeldBack(o.db.em.fork(), items), { isolate }),
    slots: new Batcher((items) => takeSlots(o.db.em.fork(), items), { isolate }),
    slotEnds: new Batcher((items) => endSlots(o.db.em.fork(), items, o.fairness.circuitTimeouts), { isolate }),
  };
  // Each outage is logged once when it begins and once when it ends, however many writes retry through it.
  const database = new OutageLog(o.logger, "database (delivery worker)");
  const pulling = new OutageLog(o.logger, "JetStream consumer (delivery worker)");
  const sweeping = new OutageLog(o.logger, "delivery sweep");
  /**
   * Runs a database write until it succeeds, with capped backoff, while the database is
   * unavailable (or the write lost a deadlock or serialization race, which trying again
   * resolves); throws when the worker stops, or at once when the database refused the write
   * itself (retrying that would hold its message for ever).
   */
  const persist = async <T>(write: () => Promise<T>): Promise<T> => {
    for (let failures = 0, conflicts = 0; ; ) {
      try {
        const result = await write();
        database.recovered();
        return result;
      } catch (err) {
        if (stopped) throw err;
        if (isTransientConflict(err) && ++conflicts <= 5) {
          await new Promise((r) => setTimeout(r, 10 * conflicts));
          continue;
        }
        if (!isDatabaseUnavailable(err)) throw err;
        database.failed(err);
        await new Promise((r) => setTimeout(r, nextDelay(++failures, 250, 5000)));
      }
    }
  };
  const agent = deliveryAgent(o.concurrency);
  let giveUp!: (v: typeof gaveUp) => void;
  // Resolves when a stop has waited long enough for the attempts in flight.
  const givenUp = new Promise<typeof gaveUp>((resolve) => (giveUp = resolve));
  const waiting = new WaitingRetries(o.endpointStreamRetries);
  const ctx: HandleContext = { o, batches, persist, agent, givenUp, waiting, streamWaitMs: o.streamWaitMs };

  // Fair shares (fairness.ts). A message whose endpoint has no free slot waits here for one (as
  // many as its endpoint's standing allows, kept alive with working()), or goes back to JetStream
  // until a slot may be free.
  const gate = new EndpointGate({ ...o.fairness, total: o.concurrency });
  const held = new Map<string, Held[]>();
  // Messages held in all: a bound on memory and heartbeats, however many endpoints are busy; and
  // a larger one for messages of endpoints not known yet, which wait here until their endpoint is (holdBack).
  const maxHeld = 4 * o.concurrency;
  const hardMaxHeld = 64 * o.concurrency;
  let heldCount = 0;
  // Of those, the ones of fast endpoints (they may use the whole worker): the pull takes that many fewer.
  let heldCounted = 0;
  let heldBack = 0;
  // Wakes the pull loop when a slot frees or a held message leaves.
  let wake: () => void = () => undefined;
  /**
   * A worker holding all it may (hardMaxHeld) pulls nothing more for up to fullPauseMs, or until
   * what it holds moves (an endpoint turned out fast, so its messages count against the pull, or
   * turned out slow, so they went back). Pulled meanwhile, a new endpoint's message could only go
   * back to JetStream until the endpoint would be known, seconds away: a fresh worker on a backlog
   * to a new endpoint pulls several thousand a second before its first answer, and a drain then
   * waited seconds for its last messages (issue 48). Past fullPauseMs it pulls again, so a flood
   * to hanging endpoints holds up other endpoints' messages behind it at most that long.
   */
  const fullPauseMs = o.fairness.fastMs;
  let fullSince: number | undefined;
  let fullTimer: NodeJS.Timeout | undefined;
  const heldFull = () => {
    if (heldCount < hardMaxHeld) {
      fullSince = undefined;
      return false;
    }
    fullSince ??= Date.now();
    return Date.now() - fullSince < fullPauseMs;
  };
  const chores = new Set<Promise<unknown>>();
  const track = (p: Promise<unknown>) => {
    chores.add(p);
    void p.finally(() => chores.delete(p));
  };
  const unhold = (h: Held) => {
    clearInterval(h.heartbeat);
    heldCount--;
    if (h.counted) heldCounted--;
  };
  /** Keeps a message the worker holds from redelivery (working() three times per ack deadline) until the interval is cleared. */
  const keepAlive = (msg: JsMsg) => setInterval(() => msg.working(), Math.max(25, Math.floor(delayAfter(o.schedule, msg.info.deliveryCount) / 3)));
  const leaseMs = slotLeaseMs(o.timeoutMs);
  let slotSeq = 0;
  const slotPrefix = `${process.pid}.${Date.now().toString(36)}.${Math.random().toString(36).slice(2, 8)}`;
  /**
   * A capped attempt's shared slot (shared-gate.ts), taken before its claim: the slot, with the
   * time its request must go out by; or undefined when every slot is held elsewhere (the message
   * is dispatched again: the gate holds or sends it back as for a full local limit).
   */
  const takeSlot = async (endpoint: string, ticket: Attempt): Promise<{ holder: string; sendBy: number } | undefined> => {
    const holder = `${slotPrefix}.${++slotSeq}`;
    // This process's monotonic clock, before the slot's lease begins on the database's.
    const takenAt = performance.now();
    const answer: SlotAnswer = await persist(() => batches.slots.add({ holder, endpointId: endpoint, cap: ticket.cap, leaseMs }));
    gate.slotAnswer(endpoint, ticket, { busyMs: answer.granted ? undefined : answer.oldestMs, circuitOpen: answer.circuitOpen });
    return answer.granted ? { holder, sendBy: takenAt + leaseMs - o.timeoutMs - takeoverMarginMs } : undefined;
  };
  const run = (msg: JsMsg, endpoint?: string, ticket?: Attempt) => {
    let slot: { holder: string; sendBy: number } | undefined;
    const attempted = (async () => {
      if (endpoint !== undefined && ticket?.capped) {
        const heartbeat = keepAlive(msg);
        slot = await takeSlot(endpoint, ticket).finally(() => clearInterval(heartbeat));
        if (!slot) return "refused" as const;
      }
      return handle(ctx, msg, ticket && (() => gate.sending(ticket)), slot?.sendBy);
    })();
    const task = attempted
      .catch((err) => {
        if (!stopped) o.logger.error({ err, seq: msg.seq }, "delivery attempt failed unexpectedly");
        return undefined;
      })
      .then(async (ended) => {
        if (endpoint === undefined || ticket === undefined) return;
        if (ended === "refused") {
          // Released by the gate; the message waits here or goes back, as its endpoint's standing says.
          if (!stopped) dispatch(msg);
          else msg.nak();
          return;
        }
        // The workers' shared state first: the slot is free for every worker once this worker's gate frees it.
        const ending = ended?.ending;
        if (slot || ending === "timeout" || (ending !== undefined && gate.owesCircuit(endpoint))) {
          const end: SlotEnd = { endpointId: endpoint, holder: slot?.holder, ending };
          const open = await persist(() => batches.slotEnds.add(end)).catch(() => undefined);
          if (open !== undefined) gate.sharedCircuit(endpoint, open);
        }
        if (ended) gate.finished(endpoint, ticket, ended.ending, ended.durationMs);
        else gate.released(endpoint, ticket);
        if (!stopped) pump();
      });
    inflight.add(task);
    void task.finally(() => {
      inflight.delete(task);
      wake();
    });
  };
  /**
   * A message of an endpoint not known yet waits here (up to hardMaxHeld in all) until its first
   * attempts show what it is. Others go back to JetStream, to come again `waitMs` from now; or, when
   * a NAK cannot be that short, to the outbox. Holding a new endpoint's burst rather than sending it
   * round keeps each message at its first delivery: once the endpoint turns out slow, a NAK spaces it
   * out at no cost, where a message already sent round once could only go back through the outbox,
   * a database write and a publish each (a flood of 1 600 to hanging endpoints did that all at once,
   * 4 s in, and another merchant's deliveries waited 2 s behind it).
   */
  const holdBack = (msg: JsMsg, endpoint: string, waitMs: number) => {
    const n = msg.info.deliveryCount;
    if (gate.standing(endpoint) === "unknown" && heldCount < hardMaxHeld) return hold(endpoint, msg, false);
    if (n < o.schedule.maxAttempts && nakReaches(o.schedule, n, waitMs)) {
      heldBack++;
      return msg.nak(nakDelayFor(o.schedule, n, waitMs));
    }
    heldBack++;
    const heartbeat = keepAlive(msg);
    track(
      persist(() => batches.heldBack.add({ id: msg.string(), seq: msg.seq }))
        // Not pending any more (finished, or a copy's attempt runs): the message is left for its redelivery.
        .then((requeued) => requeued && msg.term())
        .catch(() => undefined)
        .finally(() => clearInterval(heartbeat)),
    );
  };
  const hold = (endpoint: string, msg: JsMsg, counted: boolean) => {
    const heartbeat = keepAlive(msg);
    const queue = held.get(endpoint) ?? [];
    queue.push({ msg, heartbeat, counted });
    held.set(endpoint, queue);
    heldCount++;
    if (counted) heldCounted++;
  };
  const dispatch = (msg: JsMsg) => {
    // A retry the relay published ahead of its time (from the outbox): back to JetStream until then,
    // before it takes a slot or a claim. The claim checks the due time again (a header is a hint).
    const early = Number(msg.headers?.get(dueHeader) || 0) - Date.now();
    const n = msg.info.deliveryCount;
    if (early > earlyToleranceMs && n < o.schedule.maxAttempts && nakReaches(o.schedule, n, early)) return msg.nak(nakDelayFor(o.schedule, n, early));
    // Messages published before the header existed are not shared out: there are few, once.
    const endpoint = msg.headers?.get(endpointHeader) || undefined;
    if (endpoint === undefined) return run(msg);
    // Behind messages of its endpoint already waiting: they go first.
    const waiting = held.get(endpoint)?.length ?? 0;
    const decision = waiting === 0 ? gate.tryStart(endpoint) : undefined;
    if (decision?.start) return run(msg, endpoint, decision.attempt);
    const { hold: may, counted } = decision ?? gate.waiting(endpoint);
    // A fast endpoint's message waits here whatever its queue holds (its messages held while it was
    // new may be many): each one waiting is one fewer pulled, so they bound themselves. Sent back,
    // it would come again only after the NAK's spacing, seconds after a slot was free for it.
    const room = counted ? heldCount < hardMaxHeld : waiting < may && heldCount < maxHeld;
    if (!room) return holdBack(msg, endpoint, gate.heldBack(endpoint));
    hold(endpoint, msg, counted);
  };
  /**
   * Starts held messages while their endpoints have room, one per endpoint in turn (round-robin,
   * from a different endpoint each time), and sends back those their endpoint may no longer keep
   * waiting (it turned slow). A new endpoint that turned fast keeps all its messages waiting here,
   * counted against the pull from now on, rather than sending them back: after a restart or to a
   * new endpoint a backlog's first messages are its new endpoint's, and NAKing hundreds of them
   * spaced by its starting limit made a cold drain 5–9 times slower than a warm one (issue 48).
   * After each attempt, and every 250 ms.
   */
  let turn = 0;
  const pump = () => {
    if (heldCount === 0) return;
    const endpoints = [...held.keys()];
    const first = turn++ % endpoints.length;
    for (let progressed = true; progressed; ) {
      progressed = false;
      for (let i = 0; i < endpoints.length; i++) {
        const endpoint = endpoints[(first + i) % endpoints.length]!;
        const queue = held.get(endpoint);
        if (!queue || queue.length === 0) continue;
        const decision = gate.tryStart(endpoint);
        if (decision.start) {
          const next = queue.shift()!;
          unhold(next);
          run(next.msg, endpoint, decision.attempt);
          progressed = true;
        } else if (decision.counted) {
          for (const h of queue) {
            if (h.counted) continue;
            h.counted = true;
            heldCounted++;
          }
        } else if (gate.standing(endpoint) !== "unknown") {
          while (queue.length > decision.hold) {
            const last = queue.pop()!;
            unhold(last);
            holdBack(last.msg, endpoint, gate.heldBack(endpoint));
          }
        }
        if (queue.length === 0) held.delete(endpoint);
      }
    }
    wake();
  };
  const pumping = setInterval(pump, 250);
  pumping.unref();

  // One pull consumer loop for the worker's life. fetch() (not consume()) so that only messages
  // that can start now are pulled (see below). A fetch ends by itself when its pull request expires,
  // and with an error when two idle heartbeats are missed (its consumer's leader was lost: the pull
  // request went with it), when the consumer or stream is gone (409, or not found after a reconnect)
  // or JetStream has no responders (503). After a reconnect the client checks the consumer before it
  // pulls again, and without a heartbeat watch until that check passes: a fetch that outlives its
  // deadline is closed here. Any of these: set the stream and consumer up again (they may have been
  // lost with a server's store) and pull again, with capped backoff while it keeps failing.
  const expiresMs = 5000;
  const stalledAfterMs = expiresMs + 15_000;
  const loop = (async () => {
    let failures = 0;
    while (!stopped) {
      try {
        const nc = await Promise.race([o.nats.connected, halted]);
        await o.streamReady(failures > 0);
        const consumer = await jetstream(nc).consumers.get(o.names.stream, o.names.consumer);
        // Pull only what can start now. A message waiting in a client-side buffer gets no
        // working(), so after its ack deadline JetStream would send it again.
        while (!stopped) {
          // Refill in batches (one pull request per batch, not per message). Messages waiting for
          // a slot of a fast endpoint are as good as running.
          while (!stopped && (inflight.size + heldCounted > o.concurrency / 2 || heldFull())) {
            await new Promise<void>((resolve) => {
              wake = resolve;
              clearTimeout(fullTimer);
              const pauseLeft = fullSince === undefined ? 0 : fullSince + fullPauseMs - Date.now();
              if (pauseLeft > 0) fullTimer = setTimeout(resolve, pauseLeft);
            });
          }
          if (stopped) break;
          // Never more than the worker may hold: a message pulled beyond that could only go back.
          const room = hardMaxHeld - heldCount;
          const max = o.concurrency - inflight.size - heldCounted;
          const batch = await consumer.fetch({ max_messages: room > 0 ? Math.min(max, room) : max, expires: expiresMs });
          current = batch;
          // A pull's close() takes effect inside its iteration, so awaiting it here would wait
          // forever: the iteration below ends it.
          if (stopped) void batch.close();
          let stalled = false;
          const watchdog = setTimeout(() => {
            stalled = true;
            void batch.close();
          }, stalledAfterMs);
          try {
            for await (const msg of batch) {
              pulling.recovered();
              dispatch(msg);
            }
          } finally {
            clearTimeout(watchdog);
            current = undefined;
          }
          if (stalled && !stopped) throw new Error(`a pull from ${o.names.consumer} did not end within ${stalledAfterMs} ms`);
          // A pull request went through and ended as it should: the consumer is back.
          pulling.recovered();
          failures = 0;
        }
      } catch (err) {
        // E.g. the consumer's leader was lost, or the consumer went away (deleted, or lost with a server's store).
        if (stopped) break;
        pulling.failed(err);
        failures++;
      }
      current = undefined;
      if (!stopped) await pause(nextDelay(failures, 500, 5000));
    }
  })();

  // Nothing is left behind: deliveries whose worker died during their last attempt get no
  // redelivery, so they end; deliveries overdue past strandedAfterMs (their message lost, or
  // out of JetStream deliveries) are published again. Either way their old message goes.
  const strandedAfterMs = strandedAfter(o.schedule, o.timeoutMs);
  const sweep = setInterval(() => {
    void (async () => {
      const abandoned = await failAbandoned(o.db.em.fork(), o.schedule.maxAttempts, o.timeoutMs + 60_000);
      if (abandoned.length > 0) o.logger.warn({ deliveries: abandoned.length }, "ended deliveries whose worker stopped during the last attempt");
      const stranded = await republishStranded(o.db.em.fork(), o.schedule.maxAttempts, strandedAfterMs, o.timeoutMs);
      if (stranded.length > 0) o.logger.warn({ deliveries: stranded.length }, "published again deliveries overdue for their attempt");
      const seqs = [...abandoned, ...stranded];
      if (seqs.length > 0) {
        const jsm = await jetstreamManager(await o.nats.connected);
        for (const seq of seqs) await jsm.streams.deleteMessage(o.names.stream, seq, false).catch(() => undefined);
      }
      sweeping.recovered();
    })().catch((err) => {
      if (!stopped) sweeping.failed(err);
    });
  }, Math.min(30_000, strandedAfterMs / 2));
  sweep.unref();

  return {
    inFlight: () => gate.inFlight(),
    held: () => heldCount,
    openCircuits: () => gate.openCircuits(),
    heldBackTotal: () => heldBack,
    async stop() {
      stopped = true;
      halt(new Error("stopped"));
      clearInterval(sweep);
      clearInterval(pumping);
      clearTimeout(fullTimer);
      wake();
      await current?.close();
      await loop;
      // Messages waiting for a slot were not claimed: another worker can take them at once.
      for (const queue of held.values()) {
        for (const h of queue) {
          unhold(h);
          h.msg.nak();
        }
      }
      held.clear();
      // Attempts in flight finish and record their outcome; those still running after the grace
      // are recorded as lost (worker_lost) and put back in the outbox, so none is left processing.
      const grace = setTimeout(() => giveUp(gaveUp), o.stopGraceMs ?? stopGraceMs);
      await Promise.allSettled(inflight);
      clearTimeout(grace);
      await Promise.allSettled(chores);
      waiting.clear();
      agent.destroy();
    },
  };
}

/** A message waiting in the worker for a slot of its endpoint. */
interface Held {
  msg: JsMsg;
  heartbeat: NodeJS.Timeout;
  /** Counted against the pull: its endpoint is fast (it was when the message was held, or turned fast since). */
  counted: boolean;
}

interface Batches {
  claims: Batcher<ClaimRequest, ClaimResult>;
  finishes: Batcher<AttemptRecord, boolean>;
  heldBack: Batcher<ClaimRequest, boolean>;
  slots: Batcher<SlotRequest, SlotAnswer>;
  slotEnds: Batcher<SlotEnd, boolean | undefined>;
}

interface HandleContext {
  o: WorkerOptions;
  batches: Batches;
  persist: <T>(write: () => Promise<T>) => Promise<T>;
  agent: https.Agent;
  /** Resolves when a stop gives up on the attempts still in flight. */
  givenUp: Promise<typeof gaveUp>;
  /** This worker's retries waiting in JetStream, per endpoint (capped). */
  waiting: WaitingRetries;
  /** A retry due later than this waits in the outbox. */
  streamWaitMs: number;
}

const gaveUp = Symbol("gave up");
/** The attempt's request would have gone out later than sendWithinMs after its claim: it did not go out. */
const tooLate = Symbol("too late");

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

/**
 * Handles one message; when it made an attempt, how that ended (for the endpoint's share and
 * circuit). `sending` is called as its request goes out; `sendBy` (performance.now()): the request
 * does not go out after this (its endpoint's shared slot would lapse before it could be over).
 */
async function handle({ o, batches, persist, agent, givenUp, waiting, streamWaitMs }: HandleContext, msg: JsMsg, sending?: () => void, sendBy?: number): Promise<{ ending: Ending; durationMs: number } | undefined> {
  const deliveryCount = msg.info.deliveryCount;
  // This delivery's ack deadline: backoff[n-1].
  const deadline = delayAfter(o.schedule, deliveryCount);
  const heartbeat = setInterval(() => msg.working(), Math.max(25, Math.floor(deadline / 3)));
  // Redelivered by the server `waitMs` from now (see nakDelayFor).
  const retryIn = (waitMs: number) => msg.nak(nakDelayFor(o.schedule, deliveryCount, waitMs));
  try {
    let claim: ClaimResult;
    try {
      claim = await persist(() => batches.claims.add({ id: msg.string(), seq: msg.seq }));
    } catch (err) {
      // Stopping during an outage, or the database refused this claim: nothing was claimed, and
      // JetStream's delivery limit ends a message whose claim keeps being refused.
      if (!isDatabaseUnavailable(err)) o.logger.error({ err, delivery: msg.string(), seq: msg.seq }, "the database refused a delivery's claim");
      retryIn(1000);
      return undefined;
    }
    if ("skipped" in claim) {
      switch (claim.skipped) {
        case "in_flight":
          // A copy of the message whose attempt may be running here or elsewhere (its worker
          // stalled past the ack deadline): that attempt acknowledges the message; if it never
          // does (its worker died), the copy comes back once the delivery may be taken over. A
          // NAK on a later delivery may bring it back later than that, never sooner.
          o.logger.debug({ delivery: msg.string(), seq: msg.seq, retryInMs: claim.retryInMs }, "a copy of a message whose attempt is in flight: not sent, back once that attempt is over");
          msg.nak(Math.max(1, nakDelayFor(o.schedule, deliveryCount, claim.retryInMs)));
          return undefined;
        case "early":
          // Published again before its retry is due: wait for the schedule. A message on a later
          // JetStream delivery (held back before) cannot be NAKed for less than that delivery's
          // backoff entry: it is published again instead, as a new message that can.
          if (claim.dueInMs <= streamWaitMs && nakReaches(o.schedule, deliveryCount, claim.dueInMs)) retryIn(claim.dueInMs);
          else {
            msg.term();
            await persist(() => requeue(o.db.em.fork(), msg.string()));
          }
          return undefined;
        case "unknown":
          // Not this installation's delivery (its database has no such row): never end it here.
          o.logger.error({ delivery: msg.string(), seq: msg.seq, stream: o.names.stream }, "a delivery this database does not know: left for its owner");
          return undefined;
        default:
          // Finished already (e.g. its endpoint was disabled), or a second publish of the delivery.
          msg.term();
          return undefined;
      }
    }
    const d = claim.claimed;
    // Claimed a little before its time (a message published again comes when the outbox sends
    // it, not when the retry is due): the attempt waits for its time, never goes early.
    const earlyMs = (d.dueAt?.getTime() ?? 0) - Date.now();
    if (earlyMs > 0) await new Promise((resolve) => setTimeout(resolve, earlyMs));
    const startedAt = new Date();
    if (d.previousStatus === "processing" && d.attempt > 1) {
      await persist(() => recordLostAttempt(o.db.em.fork(), d.id, d.attempt - 1, d.previousAttemptAt ?? startedAt));
    }
    if (d.endpointStatus !== "enabled") {
      await persist(() => failClaimed(o.db.em.fork(), d.id, "endpoint_disabled"));
      msg.term();
      return undefined;
    }
    const last = d.attempt >= o.schedule.maxAttempts;
    sending?.();
    const response = await Promise.race([attempt(o, agent, d, sendBy), givenUp]);
    if (response === tooLate) {
      o.logger.warn({ delivery: d.id, attempt: d.attempt, sendWithinMs }, "an attempt not sent within its time after the claim is recorded as lost (another copy may take the delivery over)");
    }
    if (response === gaveUp || response === tooLate) {
      // Stopping, and the attempt outlived the grace; or its request did not go out in time: recorded as lost, and its
      // delivery goes on without this message (back in the outbox, or failed when it was the last attempt).
      const written = await giveUpAttempt(o.db.em.fork(), d.id, d.attempt, startedAt, last, delayAfter(o.schedule, d.attempt)).catch(() => false);
      // Not written (the database is away): JetStream hands the message out again after its
      // deadline, and the next claim records the attempt as worker_lost.
      if (written) msg.term();
      return undefined;
    }
    const result: AttemptResult = "statusCode" in response ? { statusCode: response.statusCode } : { error: response.error };
    const outcome = classify(result);
    const status = outcome === "success" ? "delivered" : outcome === "retryable" && !last ? "pending" : "failed";
    const finishedAt = Date.now();
    // The schedule follows our own attempt count (a re-published message starts its count again).
    const waitMs = delayAfter(o.schedule, d.attempt);
    const record: AttemptRecord = {
      deliveryId: d.id,
      number: d.attempt,
      startedAt,
      durationMs: finishedAt - startedAt.getTime(),
      statusCode: "statusCode" in response ? response.statusCode : undefined,
      error: "error" in response ? response.error : undefined,
      outcome,
      excerpt: "statusCode" in response ? response.excerpt : undefined,
      status,
      nextAttemptAt: status === "pending" ? new Date(finishedAt + waitMs) : undefined,
      lastError:
        "statusCode" in response
          ? outcome === "success"
            ? undefined
            : `HTTP ${response.statusCode}`
          : storableText(`${response.error}: ${response.detail}`, lastErrorChars),
    };
    let written: AttemptRecord | undefined;
    try {
      written = await finish(o, batches, persist, record);
    } catch {
      // Stopping while the database is away: the outcome is lost with this process, and the
      // next worker records the attempt as worker_lost. The message comes back after its deadline.
      return undefined;
    }
    clearInterval(heartbeat);
    const ended = { ending: endingOf(response), durationMs: record.durationMs };
    // Another worker took this delivery over (this one stalled past its deadline): the message is theirs.
    if (!written) return ended;
    o.onAttempt?.({ number: d.attempt, startedAt, result, outcome: written.outcome, eventCreatedAt: d.eventCreatedAt });
    // The retry is due this long from now.
    const dueInMs = Math.max(1, finishedAt + waitMs - Date.now());
    if (written.status === "delivered") msg.ack();
    else if (written.status === "failed") msg.term();
    else if (deliveryCount < o.schedule.maxAttempts && dueInMs <= streamWaitMs && nakReaches(o.schedule, deliveryCount, dueInMs) && waiting.take(d.endpointId, dueInMs)) {
      retryIn(dueInMs);
    } else {
      // The retry waits in the outbox, out of JetStream, and the relay publishes it when it is due
      // (store.ts takeUnpublished), so it keeps the schedule: it is due later than
      // WEBHOOK_STREAM_WAIT_SECONDS (a message waiting in JetStream counts against the consumer's
      // max_ack_pending until it comes back: a failing endpoint's backlog would fill it and stop
      // every merchant's deliveries); or its endpoint already has its share of retries waiting in
      // JetStream from this worker (waiting-retries.ts); or JetStream has no delivery left for this
      // message (copies and takeovers spent some), or a NAK on this delivery cannot bring it back on
      // time (the message was held back for its endpoint's limit before this attempt, so it is on a
      // later delivery whose backoff entry is longer than the retry's delay).
      msg.term();
      await persist(() => requeue(o.db.em.fork(), d.id));
    }
    return ended;
  } finally {
    clearInterval(heartbeat);
  }
}

function endingOf(r: Response): Ending {
  if ("statusCode" in r) return r.statusCode >= 200 && r.statusCode < 300 ? "success" : "answered";
  return r.error === "timeout" ? "timeout" : "other";
}

/** webhook_deliveries.last_error is a varchar(512). */
const lastErrorChars = 512;

/**
 * Records an attempt's outcome. When the database refuses the record itself (not an outage),
 * the attempt ends the delivery instead, recorded without what the receiver sent
 * (error "unrecorded", terminal): a record that cannot be written would otherwise hold its
 * message, and a slot of this worker, for ever. Through an outage it is retried until it lands,
 * however long: a last attempt the sweep meanwhile ended as abandoned (worker_lost) is then
 * recorded as it was answered (store.ts finishAttempts: the finish wins).
 */
async function finish(o: WorkerOptions, batches: Batches, persist: HandleContext["persist"], record: AttemptRecord): Promise<AttemptRecord | undefined> {
  try {
    return (await persist(() => batches.finishes.add(record))) ? record : undefined;
  } catch (err) {
    if (isDatabaseUnavailable(err)) throw err; // stopping during an outage
    o.logger.error({ err, delivery: record.deliveryId, attempt: record.number }, "the database refused a delivery attempt's record: the delivery ends failed (unrecorded)");
    const ended: AttemptRecord = { ...record, error: "unrecorded", outcome: "terminal", excerpt: undefined, status: "failed", nextAttemptAt: undefined, lastError: "unrecorded" };
    return (await persist(() => batches.finishes.add(ended))) ? ended : undefined;
  }
}

/** The security policy again (DNS may have changed since the endpoint was created), then the signed POST. */
async function attempt(o: WorkerOptions, agent: https.Agent, d: Claimed, sendBy = Infinity): Promise<Response | typeof tooLate> {
  let target;
  try {
    target = await resolveTarget(d.endpointUrl, o.connectTo);
  } catch (err) {
    if (err instanceof UnresolvedHost) return { error: "dns", detail: err.reason };
    if (err instanceof PolicyRejection) return { error: "security", detail: err.reason };
    throw err;
  }
  let current: string;
  let previous: string | undefined;
  try {
    current = o.secrets.open(d.endpointId, d.secretCiphertext);
    // A rotation's overlap: the previous secret signs too, until its expiry as of this attempt.
    const overlap = d.previousSecretCiphertext && d.previousSecretExpiresAt && d.previousSecretExpiresAt.getTime() > Date.now();
    previous = overlap ? o.secrets.open(d.endpointId, d.previousSecretCiphertext!) : undefined;
  } catch (err) {
    if (!(err instanceof SecretUnreadable)) throw err;
    o.logger.error({ delivery: d.id, endpoint: d.endpointId, reason: err.message }, "the endpoint's signing secret cannot be opened: the delivery ends failed (secret_unreadable)");
    return { error: "secret_unreadable", detail: err.message };
  }
  const body = Buffer.from(d.payload, "utf8");
  const timestamp = Math.floor(Date.now() / 1000);
  // Checked in the same turn as the request is made, so nothing runs between; on the monotonic
  // clock both deadlines were set on (a wall clock set back or forward moves neither).
  if (performance.now() > Math.min(d.claimSentAt + sendWithinMs, sendBy)) return tooLate;
  return send({
    url: new URL(d.endpointUrl),
    target,
    body,
    headers: {
      "content-type": "application/json",
      "user-agent": userAgent,
      "x-service-event-id": d.eventId,
      "x-service-timestamp": String(timestamp),
      ...signatureHeaders(current, previous, timestamp, body),
    },
    timeoutMs: o.timeoutMs,
    agent,
  });
}
