/**
 * How a worker shares its attempts between endpoints. JetStream hands messages out in the order
 * they were published, so without this one merchant's backlog to a hanging endpoint would take
 * every slot and every other endpoint would wait behind it. What an endpoint may take depends on
 * how its recent attempts went, so that the limit bounds only slow, hanging or failing endpoints.
 * An attempt's time here is its request's, from sending to the answer: the claim and the record
 * around it are the service's time, not the endpoint's.
 *
 * - **fast** (its recent attempts succeeded, 2xx, in under `fastMs` on average, and no request of
 *   it has waited longer than that): it may use the whole worker. Its limit starts at
 *   `perEndpoint` and grows by one with each fast success, up to `total`, so a burst to an
 *   endpoint that answers at once takes the worker within a few rounds of attempts. Its messages
 *   over the limit wait in the worker for a slot, and the worker pulls that many fewer.
 * - **unknown** (no attempt ended yet, none waiting longer than 4 × `fastMs`) and **slow** (its
 *   requests take longer than `fastMs` on average, one has waited longer than that, or its last
 *   attempt timed out): at most `perEndpoint` attempts at once (1 while its circuit is open).
 * - **failing** (quick, but most of its recent attempts did not succeed: an error status, a
 *   refused connection): its limit grows with each quick answer like a fast one's, but only
 *   within the half of the worker below, since its slots free at once and its retries should keep
 *   their time.
 * - The endpoints not known fast together have at most half of the worker's slots (a new
 *   endpoint's first attempt aside), so the other half is always there for fast endpoints and for
 *   a new endpoint's first attempt, however many endpoints fail or hang: their attempts, first ones
 *   included, all count in the half, and the pull does not wait for them (worker.ts). A fast
 *   endpoint made slow only by one request waiting (wavering()) keeps its messages waiting in the
 *   worker for a moment. Of their messages over the limit, a failing but quick endpoint's
 *   wait in the worker (about a second's worth of its attempts); an unknown endpoint's too, until
 *   it is known (perhaps a fast endpoint's burst; the worker bounds how many), and any more come
 *   back from JetStream when it will be known; a slow endpoint's go back to JetStream (heldBack),
 *   spaced at the pace the endpoint takes them. None of these hold up the pull, so the next
 *   endpoint's message in the stream is reached at once.
 * - A **circuit**: `circuitTimeouts` timeouts in a row open it: one attempt at a time (a probe)
 *   until an attempt gets an answer. The probes are the endpoint's own due deliveries, so an open
 *   circuit spends no attempt and moves no delivery off its schedule beyond waiting for that slot.
 * - **Across workers** (shared-gate.ts): an attempt started here while its endpoint is not known
 *   yet or slow is `capped`: before its claim it must also take one of the endpoint's slots that every
 *   worker shares, and the circuit counts every worker's timeouts. A refusal (every slot is held
 *   elsewhere) tells this gate how long the endpoint has kept another worker waiting, so that its
 *   standing here knows it too, and nothing of it starts here for a moment (slotAnswer()).
 *
 * Deciding here costs nothing: no database read, no message order kept here. A capped attempt's
 * slot costs a statement before its claim and one after it ends, each batched with the worker's others.
 */
export interface FairnessSettings {
  /** WEBHOOK_ENDPOINT_CONCURRENCY: attempts an endpoint not known to be fast may have in flight in one worker. */
  perEndpoint: number;
  /** WEBHOOK_ENDPOINT_FAST_MS: requests that succeed within this (on average) make an endpoint fast; one waiting longer makes it slow. */
  fastMs: number;
  /** WEBHOOK_CIRCUIT_TIMEOUTS: timeouts in a row that open an endpoint's circuit (0: never). */
  circuitTimeouts: number;
  /** WEBHOOK_CONCURRENCY: the worker's slots. */
  total: number;
}

/** How an attempt ended, as the gate sees it. */
export type Ending = "success" | "answered" | "timeout" | "other";

/** Where an endpoint stands (see above). */
export type Standing = "fast" | "unknown" | "failing" | "slow";

/**
 * Not now: `hold` is how many of the endpoint's messages may wait in the worker for a slot (0 for
 * a slow endpoint); a message beyond that goes back to JetStream, for the time heldBack() says.
 * `counted`: the waiting messages are a fast endpoint's, which may use the whole worker: they take
 * the place of messages the worker would pull. Others' do not, so messages behind them in the stream
 * (another endpoint's) are still pulled.
 */
export type Decision = { start: true; attempt: Attempt } | { start: false; hold: number; counted: boolean };

/** One running attempt, from tryStart to finished() or released(). */
export interface Attempt {
  /** When it started here (performance.now()): the slot it holds is held from then. */
  startedAt: number;
  /** When its request was sent (sending()); until then it waits for the service (claim), not the endpoint. */
  sentAt: number | undefined;
  /** Counted against the half of the slots endpoints not known fast share (all but a fast endpoint's, and a new endpoint's first). */
  shared: boolean;
  /**
   * Its endpoint was not known yet, or slow: it needs one of the endpoint's slots shared by every
   * worker, below `cap`. A fast endpoint's attempts take none, nor do a failing one's: it answers
   * at once, so its attempts free their places at once, and its share is of this worker's slots.
   */
  capped: boolean;
  /** The endpoint's limit when it started. */
  cap: number;
}

/** What the shared slots said of an endpoint (shared-gate.ts). */
export interface Elsewhere {
  /** Every slot is held by other attempts; the oldest was taken this long ago. */
  busyMs: number | undefined;
  /** The circuit, as every worker's timeouts have it. */
  circuitOpen: boolean;
}

interface EndpointState {
  /** Its running attempts, oldest first. */
  running: Set<Attempt>;
  /** Slots while fast: grows by one per fast success, back to perEndpoint after anything else. */
  limit: number;
  /** Recent attempt duration, ms (moving average); undefined until an attempt ended. */
  latency: number | undefined;
  /** Recent share of attempts that did not succeed (moving average, 0–1): failing at 0.5 or more. */
  failures: number;
  timeoutsInRow: number;
  /** Open: one attempt at a time until one is answered. */
  open: boolean;
  /** Open as the workers' shared circuit has it (another worker's timeouts may have opened it). */
  sharedOpen: boolean;
  /** Every shared slot was held elsewhere: nothing starts here before `until`; the longest wait there began at `since`. */
  elsewhere: { until: number; since: number } | undefined;
  /** When the last message held back for this endpoint is to come again: its place in a queue kept only as this time. */
  nextAt: number | undefined;
}

/** The least wait before a slow endpoint's held-back message comes back: a shorter one only spins. */
export const minRetryInMs = 1000;

/** The same for an endpoint that answers quickly (fast, or failing quickly). */
export const minQuickRetryMs = 100;

/**
 * The longest a message is sent away for at once: it comes again and is placed anew. One due later
 * than WEBHOOK_STREAM_WAIT_SECONDS waits in the outbox, not in JetStream (worker.ts holdBack): a
 * flood to 64 endpoints answering 503 has places up to a quarter of an hour away, and sent away
 * for 5 minutes at most, each message came round three times before its turn.
 */
export const maxRetryInMs = 15 * 60_000;

/** The least time per attempt a held-back backlog is spaced by (an attempt is more than its request: the claim and the record). */
export const minPaceMs = 20;

/** About how long a message of a quick endpoint over its limit may be expected to wait in the worker. */
export const holdForMs = 1000;

/**
 * The least time messages over the limit of an endpoint not known yet, beyond those that wait in
 * the worker, go back to JetStream for (heldBack says how long: until the endpoint will be known).
 * Its messages waiting in the worker do not hold up the pull, so a burst to a new endpoint never
 * holds up the others.
 */
export const firstAnswerMs = 250;

/** An endpoint not known yet is slow once a request of it has waited this many times fastMs. */
export const unknownSlowFactor = 4;

/** How long what a refused slot told of an endpoint's wait elsewhere counts here, after which a try asks again. */
export const elsewhereMemoryMs = 30_000;

/** Idle endpoints whose standing is remembered (the least recently used are forgotten). */
const memory = 10_000;

export class EndpointGate {
  private readonly endpoints = new Map<string, EndpointState>();
  private readonly s: FairnessSettings;
  /** Attempts running in all. */
  private running = 0;
  /** Attempts of endpoints not known to be fast (a new endpoint's first aside): at most half of the slots. */
  private shared = 0;
  /**
   * How long an attempt in that half holds its slot, from its start to its end (the claim, the
   * request and the record: moving average, ms); and the next free place on the half's timeline
   * for a message held back (heldBack()).
   */
  private sharedSlotMs: number | undefined;
  private sharedNextAt: number | undefined;

  constructor(s: FairnessSettings) {
    this.s = s;
  }

  /** Where `endpoint` stands now. */
  standing(endpoint: string, now = Date.now()): Standing {
    const e = this.endpoints.get(endpoint);
    return e ? this.standingOf(e, now) : "unknown";
  }

  private standingOf(e: EndpointState, now: number): Standing {
    if (e.open || e.sharedOpen) return "slow";
    // Not known yet: capped whatever it is, and its first requests pay for the connection (and
    // perhaps for a busy machine), so only a request waiting much longer makes it slow.
    if (now - this.oldestSent(e, now) > (e.latency === undefined ? unknownSlowFactor * this.s.fastMs : this.s.fastMs)) return "slow";
    if (e.latency === undefined) return "unknown";
    if (e.latency > this.s.fastMs || e.timeoutsInRow > 0) return "slow";
    return e.failures >= 0.5 ? "failing" : "fast";
  }

  /** Whether an attempt to `endpoint` may start now; if it may, it is counted as running. */
  tryStart(endpoint: string, now = Date.now()): Decision {
    const e = this.state(endpoint);
    const standing = this.standingOf(e, now);
    const fast = standing === "fast";
    const limit = this.limitOf(e, standing);
    // Only a new endpoint's first attempt is outside the half: known failing or slow endpoints'
    // first attempts count in it too, or 64 of them (one merchant's) would take the whole worker.
    const shared = !fast && !(standing === "unknown" && e.running.size === 0);
    const busyElsewhere = e.elsewhere !== undefined && now < e.elsewhere.until;
    if (this.running >= this.s.total || e.running.size >= limit || busyElsewhere || (shared && this.shared >= Math.ceil(this.s.total / 2))) {
      return { start: false, ...this.waitingOf(e, standing, limit, now) };
    }
    const attempt: Attempt = { startedAt: performance.now(), sentAt: undefined, shared, capped: standing === "unknown" || standing === "slow", cap: limit };
    e.running.add(attempt);
    this.running++;
    if (shared) this.shared++;
    return { start: true, attempt };
  }

  /** An attempt's request is being sent: from now on its time is the endpoint's. */
  sending(attempt: Attempt, now = Date.now()): void {
    attempt.sentAt = now;
  }

  /**
   * When the oldest of the endpoint's running requests was sent (`now` when none is). Attempts are
   * kept in the order they started and send in about that order: the first that has sent is taken.
   */
  private oldestSent(e: EndpointState, now: number): number {
    const elsewhere = e.elsewhere && now < e.elsewhere.until + elsewhereMemoryMs ? e.elsewhere.since : now;
    for (const a of e.running) if (a.sentAt !== undefined) return Math.min(a.sentAt, elsewhere, now);
    return Math.min(elsewhere, now);
  }

  /** How many of an endpoint's messages may wait in the worker for its slots, and whether they count against the pull. */
  waiting(endpoint: string, now = Date.now()): { hold: number; counted: boolean } {
    const e = this.endpoints.get(endpoint);
    if (!e) return { hold: this.s.total, counted: false };
    const standing = this.standingOf(e, now);
    return this.waitingOf(e, standing, this.limitOf(e, standing), now);
  }

  private waitingOf(e: EndpointState, standing: Standing, limit: number, now: number): { hold: number; counted: boolean } {
    // A moment's wait: its messages stay as a fast endpoint's do (see wavering()).
    if (standing === "slow" && this.wavering(e, now)) return { hold: this.s.total, counted: true };
    return { hold: this.holdFor(e, standing, limit), counted: standing === "fast" };
  }

  /**
   * Slow only because one of its requests has waited longer than fastMs, not yet unknownSlowFactor
   * × fastMs, while its recent requests were fast and none timed out: on a loaded machine that is
   * as often the worker's own wait as the endpoint's. Nothing more of it starts beyond its cap, but
   * its messages waiting in the worker stay there (counted against the pull, as a fast endpoint's)
   * rather than going back to JetStream at a slow endpoint's pace: sent back, a fast endpoint's
   * held backlog (hundreds of messages after a restart) came again over minutes, not seconds.
   */
  private wavering(e: EndpointState, now: number): boolean {
    if (e.latency === undefined || e.latency > this.s.fastMs || e.timeoutsInRow > 0 || e.open || e.sharedOpen || e.failures >= 0.5) return false;
    return now - this.oldestSent(e, now) <= unknownSlowFactor * this.s.fastMs;
  }

  /**
   * Attempts the endpoint may run at once: a fast one its grown limit, up to the whole worker; a
   * failing one that answers quickly its grown limit too, up to the half the endpoints not known
   * fast share (its slots free at once, and its retries keep their time); others perEndpoint, 1
   * with an open circuit.
   */
  private limitOf(e: EndpointState, standing: Standing): number {
    if (standing === "fast") return e.limit;
    if (standing === "failing") return Math.max(this.s.perEndpoint, Math.min(e.limit, Math.ceil(this.s.total / 2)));
    return e.open || e.sharedOpen ? 1 : this.s.perEndpoint;
  }

  private holdFor(e: EndpointState, standing: Standing, limit: number): number {
    switch (standing) {
      case "fast":
        return this.s.total;
      case "slow":
        return 0;
      case "unknown":
        // Perhaps a fast endpoint's burst: as many as the worker's total wait to see (bounded by the
        // worker's own limit on held messages), without holding up the pull.
        return this.s.total;
      case "failing":
        // About a second's worth of its attempts at its limit.
        return Math.min(this.s.total, Math.max(limit, Math.floor((limit * holdForMs) / Math.max(1, e.latency ?? holdForMs))));
    }
  }

  /**
   * A message of `endpoint` goes back to JetStream: how long until it should come again. Each one
   * held back takes the next place after the last, one attempt's time per slot apart (its recent
   * request time, at least as long as its oldest waiting request has taken, at least minPaceMs),
   * and none sooner than a second from now (100 ms for an endpoint that answers quickly), so a
   * backlog comes back at about the rate the endpoint takes it rather than all at once.
   */
  heldBack(endpoint: string, now = Date.now()): number {
    const e = this.state(endpoint);
    const standing = this.standingOf(e, now);
    // Not known yet: back once it is, at the latest when its oldest request has waited long enough
    // to make it slow. Sooner, a hanging endpoint's message would come back still unknown, on a
    // later JetStream delivery that a NAK can no longer space out, and go round the outbox.
    if (standing === "unknown") return Math.max(firstAnswerMs, unknownSlowFactor * this.s.fastMs - (now - this.oldestSent(e, now)));
    // A fast endpoint may use the whole worker, and its limit gets there within a few rounds of
    // attempts: spaced by its starting limit, a backlog would come back far slower than it is taken.
    const slots = standing === "fast" ? this.s.total : this.limitOf(e, standing);
    const attemptMs = Math.max(minPaceMs, e.latency ?? 0, now - this.oldestSent(e, now));
    // A quick endpoint frees its slots within moments; a slow one's would only come back to wait.
    const soonest = standing === "slow" ? minRetryInMs : minQuickRetryMs;
    let at = Math.max(now + soonest, (e.nextAt ?? now) + attemptMs / slots);
    if (standing !== "fast") {
      // Every endpoint not known fast takes its attempts from one half of the worker: each message
      // held back takes a place on the half's timeline too, its slots' measured time apart, so
      // the backlogs of many such endpoints come back at the rate the half takes them. By each
      // endpoint's own limit alone, 64 endpoints answering 503 came round a dozen times each.
      const half = Math.ceil(this.s.total / 2);
      this.sharedNextAt = Math.max(now, this.sharedNextAt ?? now) + Math.max(minPaceMs, this.sharedSlotMs ?? 0) / half;
      at = Math.max(at, this.sharedNextAt);
    }
    e.nextAt = at;
    return Math.round(Math.min(maxRetryInMs, e.nextAt - now));
  }

  /**
   * A capped attempt took its shared slot (`busyMs` undefined), or found every slot held by other
   * attempts: it does not run (it is released), and nothing more of the endpoint starts here for a
   * moment (a second if it has kept others waiting longer than fastMs, else 100 ms), each try being
   * a statement; its wait elsewhere counts in its standing here until this worker learns more.
   */
  slotAnswer(endpoint: string, attempt: Attempt, answer: Elsewhere, now = Date.now()): void {
    const e = this.state(endpoint);
    e.sharedOpen = answer.circuitOpen;
    if (answer.busyMs === undefined) {
      e.elsewhere = undefined;
      return;
    }
    this.stopped(e, attempt);
    const since = now - answer.busyMs;
    e.elsewhere = { until: now + (answer.busyMs > this.s.fastMs ? minRetryInMs : minQuickRetryMs), since: Math.min(since, e.elsewhere?.since ?? since) };
    this.remember(endpoint, e);
  }

  /** Whether an answer of the endpoint must be told to the shared circuit (it has timeouts in a row counted there, or it is open). */
  owesCircuit(endpoint: string): boolean {
    const e = this.endpoints.get(endpoint);
    return e !== undefined && (e.timeoutsInRow > 0 || e.open || e.sharedOpen);
  }

  /** The shared circuit moved (an attempt's end was recorded): open or closed as every worker's attempts have it. */
  sharedCircuit(endpoint: string, open: boolean): void {
    const e = this.endpoints.get(endpoint);
    if (e) e.sharedOpen = open;
  }

  /** An attempt started by tryStart has ended; `durationMs`: its request's. */
  finished(endpoint: string, attempt: Attempt, ending: Ending, durationMs: number): void {
    const e = this.state(endpoint);
    if (attempt.shared && e.running.has(attempt)) {
      const heldMs = performance.now() - attempt.startedAt;
      this.sharedSlotMs = this.sharedSlotMs === undefined ? heldMs : 0.9 * this.sharedSlotMs + 0.1 * heldMs;
    }
    this.stopped(e, attempt);
    // What this worker saw itself replaces what it was told of others' waits.
    e.elsewhere = undefined;
    // With no history, its first answer says what it is: an endpoint whose first answer is a 503
    // is failing, not fast (as the average from 0 made it), or its burst held while it was new
    // would count against the pull until its second answer.
    const failed = ending === "success" ? 0 : 1;
    e.failures = e.latency === undefined ? failed : 0.7 * e.failures + 0.3 * failed;
    e.latency = e.latency === undefined ? durationMs : 0.7 * e.latency + 0.3 * durationMs;
    // Any quick answer adds a slot (limitOf bounds a failing endpoint's); no answer, or a slow one, takes it back to the cap.
    const answered = ending === "success" || ending === "answered";
    if (answered && durationMs <= this.s.fastMs && e.latency <= this.s.fastMs) e.limit = Math.min(this.s.total, e.limit + 1);
    else e.limit = this.s.perEndpoint;
    if (ending === "timeout") {
      e.timeoutsInRow++;
      if (this.s.circuitTimeouts > 0 && e.timeoutsInRow >= this.s.circuitTimeouts) e.open = true;
    } else if (ending === "success" || ending === "answered") {
      // Any HTTP status: the endpoint answers again.
      e.timeoutsInRow = 0;
      e.open = false;
      e.sharedOpen = false;
    }
    this.remember(endpoint, e);
  }

  /** An attempt counted by tryStart never ran (its claim found nothing to send), or its outcome is not the endpoint's. */
  released(endpoint: string, attempt: Attempt): void {
    const e = this.state(endpoint);
    this.stopped(e, attempt);
    this.remember(endpoint, e);
  }

  private stopped(e: EndpointState, attempt: Attempt): void {
    if (!e.running.delete(attempt)) return;
    this.running--;
    if (attempt.shared) this.shared--;
  }

  /** Attempts running that count in the half the endpoints not known fast share. */
  sharedRunning(): number {
    return this.shared;
  }

  /** Attempts in flight per endpoint (endpoints with none are left out). */
  inFlight(): Map<string, number> {
    const out = new Map<string, number>();
    for (const [id, e] of this.endpoints) if (e.running.size > 0) out.set(id, e.running.size);
    return out;
  }

  /** How many endpoints have an open circuit. */
  openCircuits(): number {
    let n = 0;
    for (const e of this.endpoints.values()) if (e.open || e.sharedOpen) n++;
    return n;
  }

  private state(endpoint: string): EndpointState {
    let e = this.endpoints.get(endpoint);
    if (!e) {
      e = { running: new Set(), limit: this.s.perEndpoint, latency: undefined, failures: 0, timeoutsInRow: 0, open: false, sharedOpen: false, elsewhere: undefined, nextAt: undefined };
      this.endpoints.set(endpoint, e);
    }
    return e;
  }

  /** Most recently used last; beyond `memory` endpoints, the least recently used idle one is forgotten. */
  private remember(endpoint: string, e: EndpointState): void {
    this.endpoints.delete(endpoint);
    this.endpoints.set(endpoint, e);
    if (this.endpoints.size <= memory) return;
    for (const [id, old] of this.endpoints) {
      if (old.running.size === 0) {
        this.endpoints.delete(id);
        return;
      }
    }
  }
}
