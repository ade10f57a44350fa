/**
 * How a worker shares its attempts between endpoints. JetStream hands messages out in the order
 * they were published, so without this one merchant's backlog to a hanging endpoint would take
 * every slot and every other endpoint would wait behind it. What an endpoint may take depends on
 * how its recent attempts went, so that the limit bounds only slow, hanging or failing endpoints:
 *
 * - **fast** (its recent attempts succeeded, 2xx, in under `fastMs` on average, and none is
 *   running longer than that): it may use the whole worker. Its limit starts at `perEndpoint` and
 *   grows by one with each fast success, up to `total`, so a burst to an endpoint that has always
 *   answered at once takes the worker within a few rounds of attempts. Its messages over the limit
 *   wait in the worker for a slot (they are about to start).
 * - **unknown** (no attempt ended yet, and none running longer than firstAnswerMs), **failing** (its last attempt got an error status, or a
 *   quick transport error) and **slow** (its attempts take longer than `fastMs` on average, one is
 *   running longer than that, or its last attempt timed out): at most `perEndpoint` attempts at
 *   once (1 while its circuit is open), and beyond each one's first attempt these endpoints
 *   together have at most half of the worker's slots, so the other half is always there for fast
 *   endpoints and for a quiet endpoint's first attempt. Of the messages over the limit, a
 *   failing but quick endpoint's wait in the worker (about a second's worth of its attempts); an
 *   unknown endpoint's wait only as many as its limit and the rest come back from JetStream after
 *   firstAnswerMs, when it is known; a slow endpoint's go back to JetStream (heldBack), spaced at
 *   the pace the endpoint takes them.
 * - A **circuit**: `circuitTimeouts` timeouts in a row open it: one attempt at a time (a probe)
 *   until an attempt gets an answer. The probes are the endpoint's own due deliveries, so an open
 *   circuit spends no attempt and moves no delivery off its schedule beyond waiting for that slot.
 *
 * Deciding costs nothing: no database read, no message order kept here.
 */
export interface FairnessSettings {
  /** WEBHOOK_ENDPOINT_CONCURRENCY: attempts an endpoint not known to be fast may have in flight in one worker. */
  perEndpoint: number;
  /** WEBHOOK_ENDPOINT_FAST_MS: attempts that succeed within this (on average) make an endpoint fast; one running longer makes it slow. */
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
 * `counted`: the waiting messages are expected to start within moments (the endpoint is not slow),
 * so the worker pulls that many fewer.
 */
export type Decision = { start: true } | { start: false; hold: number; counted: boolean };

interface EndpointState {
  running: number;
  /** Of those, the attempts that count against the shared half (see tryStart). */
  shared: number;
  /** When the running attempts started, oldest first. */
  started: number[];
  /** Slots while fast: grows by one per fast success, back to perEndpoint after anything else. */
  limit: number;
  /** Recent attempt duration, ms (moving average); undefined until an attempt ended. */
  latency: number | undefined;
  /** The last attempt did not succeed (an error status, a timeout, a transport error). */
  failed: boolean;
  timeoutsInRow: number;
  /** Open: one attempt at a time until one is answered. */
  open: boolean;
  /** When the last message held back for this endpoint is to come again: its place in a queue kept only as this time. */
  nextAt: number | undefined;
}

/** The least wait before a held-back message comes back: a shorter one only spins. */
export const minRetryInMs = 1000;

/** The longest a message is sent away for at once: it comes again and is placed anew. */
export const maxRetryInMs = 5 * 60_000;

/** About how long a message of a quick endpoint over its limit may be expected to wait in the worker. */
export const holdForMs = 1000;

/**
 * An endpoint with no attempt ended yet whose first attempt has run this long counts as slow. Its
 * messages over its limit meanwhile go back to JetStream for this long: by then its first attempts
 * have shown whether it is fast (they start, or wait in the worker) or slow (they are spaced out).
 * Nothing waits in the worker for an endpoint not known yet beyond its limit, so a burst to a new
 * endpoint never holds up the pull for the others.
 */
export const firstAnswerMs = 250;

/** Idle endpoints whose standing is remembered (the least recently used are forgotten). */
const memory = 10_000;

export class EndpointGate {
  private readonly endpoints = new Map<string, EndpointState>();
  private readonly s: FairnessSettings;
  /** Attempts running in all. */
  private running = 0;
  /** Attempts of endpoints not known to be fast beyond each one's first: at most half of the slots. */
  private shared = 0;

  constructor(s: FairnessSettings) {
    this.s = s;
  }

  /** Where `endpoint` stands now. */
  standing(endpoint: string, now = Date.now()): Standing {
    const e = this.endpoints.get(endpoint);
    return e ? this.standingOf(e, now) : "unknown";
  }

  private standingOf(e: EndpointState, now: number): Standing {
    if (e.open) return "slow";
    const unknown = e.latency === undefined;
    if (e.running > 0 && now - e.started[0]! > (unknown ? Math.min(this.s.fastMs, firstAnswerMs) : this.s.fastMs)) return "slow";
    if (e.latency === undefined) return "unknown";
    if (e.latency > this.s.fastMs || e.timeoutsInRow > 0) return "slow";
    return e.failed ? "failing" : "fast";
  }

  /** Whether an attempt to `endpoint` may start now; if it may, it is counted as running. */
  tryStart(endpoint: string, now = Date.now()): Decision {
    const e = this.state(endpoint);
    const standing = this.standingOf(e, now);
    const fast = standing === "fast";
    const limit = fast ? e.limit : e.open ? 1 : this.s.perEndpoint;
    const shares = !fast && e.running >= 1;
    if (this.running >= this.s.total || e.running >= limit || (shares && this.shared >= Math.ceil(this.s.total / 2))) {
      return { start: false, hold: this.holdFor(e, standing, limit), counted: standing === "fast" || standing === "failing" };
    }
    e.running++;
    this.running++;
    if (shares) {
      e.shared++;
      this.shared++;
    }
    e.started.push(now);
    return { start: true };
  }

  /** How many of an endpoint's messages may wait in the worker for its slots. */
  hold(endpoint: string, now = Date.now()): number {
    const e = this.endpoints.get(endpoint);
    if (!e) return this.s.perEndpoint;
    const standing = this.standingOf(e, now);
    return this.holdFor(e, standing, standing === "fast" ? e.limit : e.open ? 1 : this.s.perEndpoint);
  }

  private holdFor(e: EndpointState, standing: Standing, limit: number): number {
    switch (standing) {
      case "fast":
        return this.s.total;
      case "slow":
        return 0;
      case "unknown":
        return limit;
      case "failing":
        // About a second's worth of its attempts at its limit.
        return Math.min(this.s.total, Math.max(limit, Math.floor((limit * holdForMs) / Math.max(1, e.latency ?? holdForMs))));
    }
  }

  /**
   * A message of `endpoint` goes back to JetStream: how long until it should come again. Each one
   * held back takes the next place after the last, one attempt's time per slot apart (a recent
   * attempt's time, at least as long as the oldest running one has taken, at least a second), so
   * a backlog comes back at about the rate the endpoint takes it rather than all at once.
   */
  heldBack(endpoint: string, now = Date.now()): number {
    const e = this.state(endpoint);
    // Not known yet: back as soon as its first attempts have shown what it is.
    if (this.standingOf(e, now) === "unknown") return firstAnswerMs;
    const slots = e.open ? 1 : this.s.perEndpoint;
    const attemptMs = Math.max(minRetryInMs, e.latency ?? 0, now - (e.started[0] ?? now));
    e.nextAt = Math.max(now + minRetryInMs, (e.nextAt ?? now) + attemptMs / slots);
    return Math.round(Math.min(maxRetryInMs, e.nextAt - now));
  }

  /** An attempt started by tryStart has ended. */
  finished(endpoint: string, ending: Ending, durationMs: number): void {
    const e = this.state(endpoint);
    this.stopped(e);
    e.latency = e.latency === undefined ? durationMs : 0.7 * e.latency + 0.3 * durationMs;
    e.failed = ending !== "success";
    if (ending === "success" && durationMs <= this.s.fastMs && e.latency <= this.s.fastMs) {
      e.limit = Math.min(this.s.total, e.limit + 1);
    } else {
      e.limit = this.s.perEndpoint;
    }
    if (ending === "timeout") {
      e.timeoutsInRow++;
      if (this.s.circuitTimeouts > 0 && e.timeoutsInRow >= this.s.circuitTimeouts) e.open = true;
    } else if (ending === "success" || ending === "answered") {
      // Any HTTP status: the endpoint answers again.
      e.timeoutsInRow = 0;
      e.open = false;
    }
    this.remember(endpoint, e);
  }

  /** An attempt counted by tryStart never ran (its claim found nothing to send). */
  released(endpoint: string): void {
    const e = this.state(endpoint);
    this.stopped(e);
    this.remember(endpoint, e);
  }

  /** One running attempt fewer; attempts take about as long, so the oldest is taken to be the one that ended. */
  private stopped(e: EndpointState): void {
    if (e.running === 0) return;
    e.running--;
    this.running--;
    if (e.shared > 0) {
      e.shared--;
      this.shared--;
    }
    e.started.shift();
  }

  /** Attempts in flight per endpoint (endpoints with none are left out). */
  inFlight(): Map<string, number> {
    const out = new Map<string, number>();
    for (const [id, e] of this.endpoints) if (e.running > 0) out.set(id, e.running);
    return out;
  }

  /** How many endpoints have an open circuit. */
  openCircuits(): number {
    let n = 0;
    for (const e of this.endpoints.values()) if (e.open) n++;
    return n;
  }

  private state(endpoint: string): EndpointState {
    let e = this.endpoints.get(endpoint);
    if (!e) {
      e = { running: 0, shared: 0, started: [], limit: this.s.perEndpoint, latency: undefined, failed: false, timeoutsInRow: 0, open: false, nextAt: undefined };
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
      if (old.running === 0) {
        this.endpoints.delete(id);
        return;
      }
    }
  }
}
