/**
 * The outbox relays of this process, woken by a writer right after its commit instead of by the
 * outbox trigger's NOTIFY.
 *
 * Why: PostgreSQL serialises the commits of every transaction that sends a NOTIFY (a lock on the
 * whole notification queue, held through the commit's WAL flush), so creates that each NOTIFY
 * cannot share a flush: at 300 creates/s with an endpoint, the create's p50 went from 7 ms to
 * seconds (the merchant-path bench). A writer that commits deliveries in one statement
 * (eventCtes) sets `webhook.outbox_wake` for its transaction when this process runs a relay,
 * which keeps the trigger silent, and wakes that relay once the statement has returned. Any relay
 * publishes any row, so the local one is enough; the relays of other processes still find the row
 * on their poll. With no relay here, the trigger's NOTIFY wakes every relay, as before.
 */
export class OutboxWake {
  readonly #relays = new Set<() => void>();

  /** A relay of this process: woken by wake() until the returned detach is called. */
  attach(wake: () => void): () => void {
    this.#relays.add(wake);
    return () => this.#relays.delete(wake);
  }

  /** True while a relay runs in this process: a writer may then keep the trigger silent. */
  get local(): boolean {
    return this.#relays.size > 0;
  }

  /** After a commit that kept the trigger silent. */
  wake(): void {
    for (const w of this.#relays) w();
  }
}
