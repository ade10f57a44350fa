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
 *
 * While that relay can publish (publishesAtOnce), a writer may go further: write its new
 * deliveries as published and name them to the relay after the commit, which publishes them at
 * once, outside a pass (relay.ts publishFresh): their first attempt then waits neither for a pass
 * in flight nor for a pass's commit, and no relay's statement is spent on them.
 */
export class OutboxWake {
  readonly #relays = new Set<LocalRelay>();

  /** A relay of this process: woken by wake() until the returned detach is called. */
  attach(relay: LocalRelay): () => void {
    this.#relays.add(relay);
    return () => this.#relays.delete(relay);
  }

  /** True while a relay runs in this process: a writer may then keep the trigger silent. */
  get local(): boolean {
    return this.#relays.size > 0;
  }

  /** True while a relay of this process publishes named deliveries itself (wake's `fresh`). */
  get publishesAtOnce(): boolean {
    for (const r of this.#relays) if (r.publishesAtOnce()) return true;
    return false;
  }

  /**
   * After a commit that kept the trigger silent; `fresh`, the new deliveries it wrote as published
   * (publishesAtOnce said so before the statement): one relay publishes them. With no relay left
   * (stopped since), they are the sweep's: republishStranded puts them back in the outbox.
   */
  wake(fresh?: readonly FreshDelivery[]): void {
    for (const r of this.#relays) {
      r.wake(fresh);
      if (fresh) return;
    }
  }
}

/** A relay as its process's writers see it. */
export interface LocalRelay {
  wake(fresh?: readonly FreshDelivery[]): void;
  publishesAtOnce(): boolean;
}

/** A new delivery (its message the delivery's own id: never sent back to the outbox), as its writer committed it. */
export interface FreshDelivery {
  id: string;
  merchantId: string;
  endpointId: string;
}
