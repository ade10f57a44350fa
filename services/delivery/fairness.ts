/**
 * How a worker shares its attempts between endpoints. JetStream hands messages out in the order
 * they were published, so without this one merchant's backlog to a hanging endpoint would take
 * every slot and every other endpoint would wait behind it. Each endpoint may run at most
 * `perEndpoint` attempts at once. An endpoint whose attempts time out `circuitTimeouts` times in a
 * row has its circuit opened: one attempt at a time (a probe) until an attempt gets an answer.
 * The probes are the endpoint's own due deliveries, so an open circuit spends no attempt and moves
 * no delivery off its schedule beyond waiting for that one slot. Deciding costs nothing: no
 * database read, no message order kept here.
 */
export interface FairnessSettings {
  /** WEBHOOK_ENDPOINT_CONCURRENCY: attempts one endpoint may have in flight in one worker. */
  perEndpoint: number;
  /** WEBHOOK_CIRCUIT_TIMEOUTS: timeouts in a row that open an endpoint's circuit (0: never). */
  circuitTimeouts: number;
}

/** How an attempt ended, as the circuit sees it. */
export type Ending = "answered" | "timeout" | "other";

/**
 * Not now: `hold` is how many of the endpoint's messages may wait in the worker for its slots
 * (more for an endpoint known to answer fast, whose slots free within moments); a message beyond
 * that goes back to JetStream, for the time heldBack() says.
 */
export type Decision = { start: true } | { start: false; hold: number };

interface EndpointState {
  running: number;
  /** When the running attempts started, oldest first. */
  started: number[];
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

/** How long a message may be expected to wait in the worker for its endpoint's slot. */
export const holdForMs = 1000;

/** Endpoints whose recent attempt duration is remembered while idle (the least recent are forgotten). */
const latencyMemory = 10_000;

export class EndpointGate {
  private readonly endpoints = new Map<string, EndpointState>();
  /** Recent attempt duration per endpoint (moving average), to guess when a slot frees. */
  private readonly latency = new Map<string, number>();
  private readonly s: FairnessSettings;
  private readonly timeoutMs: number;

  constructor(s: FairnessSettings, timeoutMs: number) {
    this.s = s;
    this.timeoutMs = timeoutMs;
  }

  /** Whether an attempt to `endpoint` may start now; if it may, it is counted as running. */
  tryStart(endpoint: string, now = Date.now()): Decision {
    const e = this.state(endpoint);
    const slots = e.open ? 1 : this.s.perEndpoint;
    if (e.running >= slots) {
      const latency = this.latency.get(endpoint);
      // Many may wait for an endpoint known to be fast; for one not known, or slow, a share's worth.
      const hold = latency === undefined ? slots : Math.min(64, Math.max(slots, Math.floor((slots * holdForMs) / Math.max(1, latency))));
      return { start: false, hold };
    }
    e.running++;
    e.started.push(now);
    return { start: true };
  }

  /**
   * A message of `endpoint` goes back to JetStream: how long until it should come again. Each one
   * held back takes the next place after the last, one attempt's time per slot apart (a recent
   * attempt's time, at least as long as the oldest running one has taken, at least a second), so
   * a backlog comes back at about the rate the endpoint takes it rather than all at once.
   */
  heldBack(endpoint: string, now = Date.now()): number {
    const e = this.state(endpoint);
    const slots = e.open ? 1 : this.s.perEndpoint;
    const attemptMs = Math.max(minRetryInMs, this.latency.get(endpoint) ?? 0, now - (e.started[0] ?? now));
    e.nextAt = Math.max(now + minRetryInMs, (e.nextAt ?? now) + attemptMs / slots);
    return Math.round(Math.min(maxRetryInMs, e.nextAt - now));
  }

  /** An attempt started by tryStart has ended. */
  finished(endpoint: string, ending: Ending, durationMs: number): void {
    const e = this.state(endpoint);
    this.stopped(e);
    const before = this.latency.get(endpoint);
    this.latency.delete(endpoint);
    this.latency.set(endpoint, before === undefined ? durationMs : 0.7 * before + 0.3 * durationMs);
    if (this.latency.size > latencyMemory) this.latency.delete(this.latency.keys().next().value!);
    if (ending === "timeout") {
      e.timeoutsInRow++;
      if (this.s.circuitTimeouts > 0 && e.timeoutsInRow >= this.s.circuitTimeouts) e.open = true;
    } else if (ending === "answered") {
      // Any HTTP status: the endpoint answers again.
      e.timeoutsInRow = 0;
      e.open = false;
    }
    this.forgetIfIdle(endpoint, e);
  }

  /** An attempt counted by tryStart never ran (its claim found nothing to send). */
  released(endpoint: string): void {
    const e = this.state(endpoint);
    this.stopped(e);
    this.forgetIfIdle(endpoint, e);
  }

  /** One running attempt fewer; attempts take about as long, so the oldest is taken to be the one that ended. */
  private stopped(e: EndpointState): void {
    e.running = Math.max(0, e.running - 1);
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
      e = { running: 0, started: [], timeoutsInRow: 0, open: false, nextAt: undefined };
      this.endpoints.set(endpoint, e);
    }
    return e;
  }

  /** Endpoints that answer and are idle keep no state but their latency: the map holds only what is busy or failing. */
  private forgetIfIdle(endpoint: string, e: EndpointState): void {
    if (e.running === 0 && e.timeoutsInRow === 0 && !e.open) this.endpoints.delete(endpoint);
  }
}
