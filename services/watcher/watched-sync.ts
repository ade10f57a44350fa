import { Code, ConnectError } from "@connectrpc/connect";
import type { WatchedAddresses } from "./watched.ts";

/** A full re-read of the watched addresses this often drops those of intents that can no longer be paid. */
const resyncMs = 10 * 60_000;

/**
 * Keeps a chain's watched set in step with the core: what was handed out since the last call, every
 * call; the whole set again every 10 minutes (replacing the old one only once it is complete).
 */
export class WatchedSync {
  readonly #list: (cursor: string | undefined) => Promise<{ addresses: string[]; hasMore: boolean; nextCursor: string }>;
  readonly #set: WatchedAddresses;
  #cursor: string | undefined;
  #resyncAt = 0;

  constructor(set: WatchedAddresses, list: (cursor: string | undefined) => Promise<{ addresses: string[]; hasMore: boolean; nextCursor: string }>) {
    this.#set = set;
    this.#list = list;
  }

  get size(): number {
    return this.#set.size;
  }

  async refresh(): Promise<void> {
    try {
      await this.#read();
    } catch (err) {
      // A cursor the core can no longer read (its key changed, a core of another version): read the whole set again, now.
      if (!(err instanceof ConnectError && err.code === Code.InvalidArgument) || Date.now() >= this.#resyncAt) throw err;
      this.#resyncAt = 0;
      await this.#read();
    }
  }

  async #read(): Promise<void> {
    const full = Date.now() >= this.#resyncAt;
    let cursor = full ? undefined : this.#cursor;
    const fresh: string[] = [];
    for (;;) {
      const page = await this.#list(cursor);
      if (full) fresh.push(...page.addresses);
      else for (const a of page.addresses) this.#set.add(a);
      cursor = page.nextCursor;
      if (!page.hasMore) break;
    }
    if (full) {
      this.#set.clear();
      for (const a of fresh) this.#set.add(a);
      this.#resyncAt = Date.now() + resyncMs;
    }
    this.#cursor = cursor;
  }
}
