import type { Logger } from "./logger.ts";

/**
 * Logs an outage of a dependency once at its start and once at its end, so a
 * loop retrying every second through a long outage does not flood the log.
 */
export class OutageLog {
  #logger: Logger;
  #what: string;
  #since: number | undefined;
  #failures = 0;
  #now: () => number;

  /** `what` names the dependency in the log lines: "database", "relay", ... */
  constructor(logger: Logger, what: string, now: () => number = Date.now) {
    this.#logger = logger;
    this.#what = what;
    this.#now = now;
  }

  /** Whether an outage is open (a failure not yet followed by `recovered`). */
  get failing(): boolean {
    return this.#since !== undefined;
  }

  /** Failures since the outage began; 0 when none is open. */
  get failures(): number {
    return this.#failures;
  }

  failed(err: unknown): void {
    this.#failures++;
    // Only the message: a whole error object may carry connection strings or query parameters.
    const error = messageOf(err);
    if (this.#since === undefined) {
      this.#since = this.#now();
      this.#logger.warn({ what: this.#what, error }, `${this.#what} unavailable; retrying`);
    } else {
      this.#logger.debug({ what: this.#what, error, failures: this.#failures }, `${this.#what} still unavailable`);
    }
  }

  recovered(): void {
    if (this.#since === undefined) return;
    const duration_ms = Math.max(0, this.#now() - this.#since);
    this.#logger.info({ what: this.#what, duration_ms, failures: this.#failures }, `${this.#what} recovered`);
    this.#since = undefined;
    this.#failures = 0;
  }
}

function messageOf(err: unknown): string {
  if (err instanceof Error) return err.message || err.name;
  return String(err);
}

/**
 * The wait before the next attempt after `failures` consecutive failures:
 * baseMs doubled per failure, never above capMs (0 failures: baseMs).
 */
export function nextDelay(failures: number, baseMs: number, capMs: number): number {
  const exp = Math.max(0, failures - 1);
  // 2 ** exp overflows to Infinity long before it matters; min() keeps the cap.
  return Math.min(capMs, baseMs * 2 ** Math.min(exp, 30));
}
