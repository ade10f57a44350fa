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

export type Decision = { start: true } | { start: false; retryInMs: number };

interface EndpointState {
  running: number;
  timeoutsInRow: number;
  /** Open: one attempt at a time until one is answered. */
  open: boolean;
  /** Recent attempt duration (moving average), to guess when a slot frees. */
  latencyMs: number | undefined;
}

/** The least wait before a held-back message comes back: a shorter one only spins. */
export const minRetryInMs = 1000;

export class EndpointGate {
  private readonly endpoints = new Map<string, EndpointState>();
  private readonly s: FairnessSettings;
  private readonly timeoutMs: number;

  constructor(s: FairnessSettings, timeoutMs: number) {
    this.s = s;
    this.timeoutMs = timeoutMs;
  }

  /** Whether an attempt to `endpoint` may start now; if it may, it is counted as running. */
  tryStart(endpoint: string): Decision {
    const e = this.state(endpoint);
    if (e.running >= (e.open ? 1 : this.s.perEndpoint)) {
      // A slot frees when one of the running attempts ends: about one recent attempt's time.
      const guess = Math.min(this.timeoutMs, e.latencyMs ?? this.timeoutMs);
      return { start: false, retryInMs: Math.max(minRetryInMs, Math.round(2 * guess)) };
    }
    e.running++;
    return { start: true };
  }

  /** An attempt started by tryStart has ended. */
  finished(endpoint: string, ending: Ending, durationMs: number): void {
    const e = this.state(endpoint);
    e.running = Math.max(0, e.running - 1);
    e.latencyMs = e.latencyMs === undefined ? durationMs : 0.7 * e.latencyMs + 0.3 * durationMs;
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
    e.running = Math.max(0, e.running - 1);
    this.forgetIfIdle(endpoint, e);
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
      e = { running: 0, timeoutsInRow: 0, open: false, latencyMs: undefined };
      this.endpoints.set(endpoint, e);
    }
    return e;
  }

  /** Endpoints that answer and are idle keep no state: the map holds only what is busy or failing. */
  private forgetIfIdle(endpoint: string, e: EndpointState): void {
    if (e.running === 0 && e.timeoutsInRow === 0 && !e.open) this.endpoints.delete(endpoint);
  }
}
