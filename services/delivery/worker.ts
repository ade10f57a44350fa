import { jetstream, type JsMsg } from "@nats-io/jetstream";
import type { ConnectTo } from "../platform/connect-to.ts";
import type { Database } from "../platform/db.ts";
import { isDatabaseUnavailable, isTransientConflict } from "../platform/errors.ts";
import type { Logger } from "../platform/logger.ts";
import type { Nats } from "../platform/nats.ts";
import { OutageLog, nextDelay } from "../platform/outage.ts";
import type { SecretBox } from "../platform/secrets.ts";
import { Batcher } from "./batcher.ts";
import { dispatchMessage, gaveUp, sendWithinMs, takeoverAfter, takeoverMarginMs, type Batches, type DispatchContext } from "./dispatch.ts";
import { EndpointGate, type Attempt, type FairnessSettings } from "./fairness.ts";
import { dueHeader, endpointHeader, type StreamNames } from "./jetstream.ts";
import { delayAfter, nakDelayFor, nakReaches, type Schedule } from "./schedule.ts";
import { deliveryAgent } from "./send.ts";
import { endSlots, takeSlots, type SlotAnswer, type SlotEnd } from "./shared-gate.ts";
import { startSweep } from "./sweep.ts";
import { WaitingRetries } from "./waiting-retries.ts";
import { claimDeliveries, earlyToleranceMs, finishAttempts, requeueHeldBack } from "./webhook-deliveries.ts";

/**
 * The delivery worker's own work: the pull loop, the messages it holds for a free slot of their
 * endpoint, and its start and stop. One message's attempt is dispatch.ts's; the sweep of abandoned
 * and stranded deliveries is sweep.ts's; the worker role (worker-role.ts) starts it with the relay.
 */

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
  onAttempt?: DispatchContext["onAttempt"];
}

/**
 * How long a stopping worker waits for its attempts in flight. The app's whole stop has 15 s;
 * an attempt still running after this is recorded as lost rather than left in processing.
 */
export const stopGraceMs = 5000;

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

/** A message waiting in the worker for a slot of its endpoint. */
interface Held {
  msg: JsMsg;
  heartbeat: NodeJS.Timeout;
  /** Counted against the pull: its endpoint is fast (it was when the message was held, or turned fast since). */
  counted: boolean;
}

/**
 * What the pull loop and the holding share: how many attempts run and how many messages are held
 * decide how much the loop pulls, and the holding wakes the loop when those change. One object,
 * so that each side reads the counts the other keeps.
 */
interface WorkerState {
  stopped: boolean;
  /** Attempts started (their slot taken or asked for, claimed, running, being recorded). */
  inflight: Set<Promise<void>>;
  /** Messages waiting for a slot, per endpoint, in arrival order. */
  held: Map<string, Held[]>;
  /** Messages held in all. */
  heldCount: number;
  /** Of those, the ones of fast endpoints (they may use the whole worker): the pull takes that many fewer. */
  heldCounted: number;
  /** Messages sent back because their endpoint had no free slot, since start. */
  heldBack: number;
  /** Since when the worker has held all it may (hardMaxHeld), while it does. */
  fullSince: number | undefined;
  /** The pull loops waiting for a slot to free or a held message to leave (one per lane). */
  waiting: Set<() => void>;
  /** Wakes the waiting pull loops. */
  wake: () => void;
  /** The pulls in progress (one per lane), closed by a stop. */
  current: Set<{ close(): Promise<void | Error> }>;
  /** Messages the pulls in progress asked for and have not brought yet: room already spoken for. */
  requested: number;
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
  const state: WorkerState = {
    stopped: false,
    inflight: new Set(),
    held: new Map(),
    heldCount: 0,
    heldCounted: 0,
    heldBack: 0,
    fullSince: undefined,
    waiting: new Set(),
    wake: () => {
      for (const resolve of state.waiting) resolve();
      state.waiting.clear();
    },
    current: new Set(),
    requested: 0,
  };
  let halt!: (err: Error) => void;
  // Rejects at stop(), so nothing waits for a NATS connection that never comes.
  const halted = new Promise<never>((_, reject) => (halt = reject));
  halted.catch(() => undefined);
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
  const persist = persistent(o.logger, () => state.stopped);
  const agent = deliveryAgent(o.concurrency);
  let giveUp!: (v: typeof gaveUp) => void;
  // Resolves when a stop has waited long enough for the attempts in flight.
  const givenUp = new Promise<typeof gaveUp>((resolve) => (giveUp = resolve));
  const waiting = new WaitingRetries(o.endpointStreamRetries);
  const ctx: DispatchContext = {
    db: o.db,
    names: o.names,
    schedule: o.schedule,
    secrets: o.secrets,
    connectTo: o.connectTo,
    timeoutMs: o.timeoutMs,
    logger: o.logger,
    onAttempt: o.onAttempt,
    batches,
    persist,
    agent,
    givenUp,
    waiting,
    streamWaitMs: o.streamWaitMs,
  };

  // Fair shares (fairness.ts). A message whose endpoint has no free slot waits here for one (as
  // many as its endpoint's standing allows, kept alive with working()), or goes back to JetStream
  // until a slot may be free.
  const gate = new EndpointGate({ ...o.fairness, total: o.concurrency });
  const { held } = state;
  // Messages held in all: a bound on memory and heartbeats, however many endpoints are busy; and
  // a larger one for messages of endpoints not known yet, which wait here until their endpoint is (holdBack).
  const maxHeld = 4 * o.concurrency;
  const hardMaxHeld = 64 * o.concurrency;
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
  const heldFull = () => {
    // What the other lane's pull is bringing counts: both lanes' pulls fill one holding.
    if (state.heldCount + state.requested < hardMaxHeld) {
      state.fullSince = undefined;
      return false;
    }
    state.fullSince ??= Date.now();
    return Date.now() - state.fullSince < fullPauseMs;
  };
  const chores = new Set<Promise<unknown>>();
  const track = (p: Promise<unknown>) => {
    chores.add(p);
    void p.finally(() => chores.delete(p));
  };
  const unhold = (h: Held) => {
    clearInterval(h.heartbeat);
    state.heldCount--;
    if (h.counted) state.heldCounted--;
  };
  /** Keeps a message the worker holds from redelivery (working() three times per ack deadline) until the interval is cleared. */
  const keepAlive = (msg: JsMsg) => setInterval(() => msg.working(), Math.max(25, Math.floor(delayAfter(o.schedule, msg.info.deliveryCount) / 3)));
  const leaseMs = slotLeaseMs(o.timeoutMs);
  let slotSeq = 0;
  const slotPrefix = `${process.pid}.${Date.now().toString(36)}.${Math.random().toString(36).slice(2, 8)}`;
  /**
   * A capped attempt's shared slot (shared-gate.ts), taken before its claim: the slot, with the
   * time its request must go out by; or undefined when every slot is held elsewhere (the message
   * is admitted again: the gate holds or sends it back as for a full local limit).
   */
  const takeSlot = async (endpoint: string, ticket: Attempt): Promise<{ holder: string; sendBy: number } | undefined> => {
    const holder = `${slotPrefix}.${++slotSeq}`;
    // This process's monotonic clock, before the slot's lease begins on the database's.
    const takenAt = performance.now();
    const answer: SlotAnswer = await persist(() => batches.slots.add({ holder, endpointId: endpoint, cap: ticket.cap, leaseMs }));
    gate.slotAnswer(endpoint, ticket, { busyMs: answer.granted ? undefined : answer.oldestMs, circuitOpen: answer.circuitOpen });
    return answer.granted ? { holder, sendBy: takenAt + leaseMs - o.timeoutMs - takeoverMarginMs } : undefined;
  };
  /** Starts one message's attempt (dispatch.ts), and afterwards gives its endpoint's slot back. */
  const run = (msg: JsMsg, endpoint?: string, ticket?: Attempt) => {
    let slot: { holder: string; sendBy: number } | undefined;
    const attempted = (async () => {
      if (endpoint !== undefined && ticket?.capped) {
        const heartbeat = keepAlive(msg);
        slot = await takeSlot(endpoint, ticket).finally(() => clearInterval(heartbeat));
        if (!slot) return "refused" as const;
      }
      return dispatchMessage(ctx, msg, ticket && (() => gate.sending(ticket)), slot?.sendBy);
    })();
    const task = attempted
      .catch((err) => {
        if (!state.stopped) o.logger.error({ err, seq: msg.seq }, "delivery attempt failed unexpectedly");
        return undefined;
      })
      .then(async (ended) => {
        if (endpoint === undefined || ticket === undefined) return;
        if (ended === "refused") {
          // Released by the gate; the message waits here or goes back, as its endpoint's standing says.
          if (!state.stopped) admit(msg);
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
        if (!state.stopped) pump();
      });
    state.inflight.add(task);
    void task.finally(() => {
      state.inflight.delete(task);
      state.wake();
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
    if (gate.standing(endpoint) === "unknown" && state.heldCount < hardMaxHeld) return hold(endpoint, msg, false);
    state.heldBack++;
    // NAKed, it waits in JetStream, counted against max_ack_pending until it comes back: only
    // within the endpoint's share of messages waiting there (its retries' share, WaitingRetries).
    // Past it, it waits in the outbox until its turn: 105 600 first attempts to 64 endpoints
    // answering 503, all NAKed, filled the consumer's 100 000 and another merchant's webhooks stopped.
    if (n < o.schedule.maxAttempts && waitMs <= o.streamWaitMs && nakReaches(o.schedule, n, waitMs) && waiting.take(endpoint, waitMs)) {
      return msg.nak(nakDelayFor(o.schedule, n, waitMs));
    }
    const heartbeat = keepAlive(msg);
    track(
      persist(() => batches.heldBack.add({ id: msg.string(), seq: msg.seq, waitMs }))
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
    state.heldCount++;
    if (counted) state.heldCounted++;
  };
  /** Runs a message now, holds it for a slot of its endpoint, or sends it back, as its endpoint's share allows. */
  const admit = (msg: JsMsg) => {
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
    const room = counted ? state.heldCount < hardMaxHeld : waiting < may && state.heldCount < maxHeld;
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
    if (state.heldCount === 0) return;
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
            state.heldCounted++;
          }
        } else {
          // Not fast (any more: one 503 left it fast, the next made it failing): its messages
          // waiting here no longer take the place of messages the worker would pull, or a burst
          // held while it was new would hold up every other endpoint's messages behind it.
          // (Only while any held message is counted: the pump runs after every attempt.)
          for (let i = 0; state.heldCounted > 0 && i < queue.length; i++) {
            if (!queue[i]!.counted) continue;
            queue[i]!.counted = false;
            state.heldCounted--;
          }
          if (gate.standing(endpoint) !== "unknown") {
            while (queue.length > decision.hold) {
              const last = queue.pop()!;
              unhold(last);
              holdBack(last.msg, endpoint, gate.heldBack(endpoint));
            }
          }
        }
        if (queue.length === 0) held.delete(endpoint);
      }
    }
    state.wake();
  };
  const pumping = setInterval(pump, 250);
  pumping.unref();

  // One loop per lane (lanes.ts), each pulling as the worker has room, into the same holding.
  const admission: Admission = { halted, admit, heldFull, fullPauseMs, hardMaxHeld, sharedRunning: () => gate.sharedRunning() };
  const loops = [o.names.consumer, o.names.backlogConsumer].map((consumer) => pullLoop(o, consumer, state, admission));
  const sweep = startSweep({ db: o.db, nats: o.nats, names: o.names, schedule: o.schedule, timeoutMs: o.timeoutMs, logger: o.logger, stopped: () => state.stopped });

  return {
    inFlight: () => gate.inFlight(),
    held: () => state.heldCount,
    openCircuits: () => gate.openCircuits(),
    heldBackTotal: () => state.heldBack,
    async stop() {
      state.stopped = true;
      halt(new Error("stopped"));
      sweep.stop();
      clearInterval(pumping);
      state.wake();
      await Promise.all([...state.current].map((pull) => pull.close()));
      await Promise.all(loops);
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
      await Promise.allSettled(state.inflight);
      clearTimeout(grace);
      await Promise.allSettled(chores);
      waiting.clear();
      agent.destroy();
    },
  };
}

/**
 * Runs a database write until it succeeds, with capped backoff, while the database is
 * unavailable (or the write lost a deadlock or serialization race, which trying again
 * resolves); throws when the worker stops, or at once when the database refused the write
 * itself (retrying that would hold its message for ever). Each outage is logged once when it
 * begins and once when it ends, however many writes retry through it.
 */
function persistent(logger: Logger, stopped: () => boolean): <T>(write: () => Promise<T>) => Promise<T> {
  const database = new OutageLog(logger, "database (delivery worker)");
  return async <T>(write: () => Promise<T>): Promise<T> => {
    for (let failures = 0, conflicts = 0; ; ) {
      try {
        const result = await write();
        database.recovered();
        return result;
      } catch (err) {
        if (stopped()) throw err;
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
}


/** What the pull loop needs of the holding (startDeliveryWorker). */
interface Admission {
  /** Rejects when the worker stops. */
  halted: Promise<never>;
  /** Runs, holds or sends back a pulled message. */
  admit: (msg: JsMsg) => void;
  /** Whether the worker holds all it may (and has for less than fullPauseMs). */
  heldFull: () => boolean;
  fullPauseMs: number;
  hardMaxHeld: number;
  /** Attempts running in the half the endpoints not known fast share (fairness.ts). */
  sharedRunning: () => number;
}

// One pull consumer loop for the worker's life. fetch() (not consume()) so that only messages
// that can start now are pulled (see below). A fetch ends by itself when its pull request expires,
// and with an error when two idle heartbeats are missed (its consumer's leader was lost: the pull
// request went with it), when the consumer or stream is gone (409, or not found after a reconnect)
// or JetStream has no responders (503). After a reconnect the client checks the consumer before it
// pulls again, and without a heartbeat watch until that check passes: a fetch that outlives its
// deadline is closed here. Any of these: set the stream and consumer up again (they may have been
// lost with a server's store) and pull again, with capped backoff while it keeps failing.
async function pullLoop(
  o: WorkerOptions,
  consumerName: string,
  state: WorkerState,
  { halted, admit, heldFull, fullPauseMs, hardMaxHeld, sharedRunning }: Admission,
): Promise<void> {
  /** A wait that stop() cuts short. */
  const pause = (ms: number) => Promise.race([new Promise((r) => setTimeout(r, ms)), halted]).catch(() => undefined);
  const expiresMs = 5000;
  const stalledAfterMs = expiresMs + 15_000;
  // Each outage of the consumer is logged once when it begins and once when it ends.
  const pulling = new OutageLog(o.logger, `JetStream consumer ${consumerName} (delivery worker)`);
  let current: { close(): Promise<void | Error> } | undefined;
  let fullTimer: NodeJS.Timeout | undefined;
  let failures = 0;
  while (!state.stopped) {
    try {
      const nc = await Promise.race([o.nats.connected, halted]);
      await o.streamReady(failures > 0);
      const consumer = await jetstream(nc).consumers.get(o.names.stream, consumerName);
      // Pull only what can start now. A message waiting in a client-side buffer gets no
      // working(), so after its ack deadline JetStream would send it again.
      while (!state.stopped) {
        // Refill in batches (one pull request per batch, not per message). Messages waiting for
        // a slot of a fast endpoint are as good as running. Attempts in the half the endpoints not
        // known fast share (fairness.ts) do not hold the pull up: what is pulled for them waits
        // here (bounded) or goes back, and another endpoint's message behind them in the stream is
        // reached at once (a flood to 64 endpoints answering 503 kept another merchant's first
        // attempts 5 s behind it while their attempts filled the worker).
        const busy = () => state.inflight.size - sharedRunning() + state.heldCounted;
        while (!state.stopped && (busy() > o.concurrency / 2 || heldFull())) {
          await new Promise<void>((resolve) => {
            state.waiting.add(resolve);
            clearTimeout(fullTimer);
            const pauseLeft = state.fullSince === undefined ? 0 : state.fullSince + fullPauseMs - Date.now();
            if (pauseLeft > 0) fullTimer = setTimeout(resolve, pauseLeft);
          });
          clearTimeout(fullTimer);
        }
        if (state.stopped) break;
        // Never more than the worker may hold: a message pulled beyond that could only go back. The
        // other lane's pull may be bringing some meanwhile: its room is spoken for.
        const room = hardMaxHeld - state.heldCount - state.requested;
        const max = o.concurrency - busy();
        const asked = Math.max(1, room > 0 ? Math.min(max, room) : max);
        let brought = 0;
        state.requested += asked;
        const batch = await consumer.fetch({ max_messages: asked, expires: expiresMs }).catch((err: unknown) => {
          state.requested -= asked;
          throw err;
        });
        current = batch;
        state.current.add(batch);
        // A pull's close() takes effect inside its iteration, so awaiting it here would wait
        // forever: the iteration below ends it.
        if (state.stopped) void batch.close();
        let stalled = false;
        const watchdog = setTimeout(() => {
          stalled = true;
          void batch.close();
        }, stalledAfterMs);
        try {
          for await (const msg of batch) {
            pulling.recovered();
            if (brought++ < asked) state.requested--;
            admit(msg);
          }
        } finally {
          state.requested -= Math.max(0, asked - brought);
          // Room it spoke for and did not take: the other lane's loop may be waiting for it.
          if (asked > brought) state.wake();
          clearTimeout(watchdog);
          state.current.delete(batch);
          current = undefined;
        }
        if (stalled && !state.stopped) throw new Error(`a pull from ${consumerName} did not end within ${stalledAfterMs} ms`);
        // A pull request went through and ended as it should: the consumer is back.
        pulling.recovered();
        failures = 0;
      }
    } catch (err) {
      // E.g. the consumer's leader was lost, or the consumer went away (deleted, or lost with a server's store).
      if (state.stopped) break;
      pulling.failed(err);
      failures++;
    }
    if (current) state.current.delete(current);
    current = undefined;
    if (!state.stopped) await pause(nextDelay(failures, 500, 5000));
  }
}
