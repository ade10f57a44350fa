/**
 * The messages one worker process leaves waiting in JetStream, per endpoint: each retry NAKed to
 * come back when due, and each message held back for a free slot (worker.ts holdBack), counts
 * until then. An endpoint whose count has reached the cap (WEBHOOK_ENDPOINT_STREAM_RETRIES) has
 * its further ones wait in the outbox instead (the relay publishes each when due), so one failing
 * endpoint, however many deliveries it has waiting, holds at most cap × workers of the consumer's
 * max_ack_pending with them. A worker that
 * restarts starts counting from nothing: the messages it NAKed still wait, at most another cap's
 * worth, and come back within WEBHOOK_STREAM_WAIT_SECONDS.
 */
export class WaitingRetries {
  readonly #cap: number;
  readonly #count = new Map<string, number>();
  readonly #timers = new Set<NodeJS.Timeout>();

  constructor(cap: number) {
    this.#cap = cap;
  }

  /** Counts a retry of `endpoint` waiting `ms` in JetStream if the endpoint is under the cap; false: it waits in the outbox. */
  take(endpoint: string, ms: number): boolean {
    const n = this.#count.get(endpoint) ?? 0;
    if (n >= this.#cap) return false;
    this.#count.set(endpoint, n + 1);
    const timer = setTimeout(() => {
      this.#timers.delete(timer);
      const left = (this.#count.get(endpoint) ?? 1) - 1;
      if (left > 0) this.#count.set(endpoint, left);
      else this.#count.delete(endpoint);
    }, ms);
    timer.unref();
    this.#timers.add(timer);
    return true;
  }

  /** Retries of `endpoint` counted now. */
  of(endpoint: string): number {
    return this.#count.get(endpoint) ?? 0;
  }

  clear(): void {
    for (const t of this.#timers) clearTimeout(t);
    this.#timers.clear();
    this.#count.clear();
  }
}
