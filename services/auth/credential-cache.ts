import type { Logger } from "../platform/logger.ts";
import { setBounded } from "../platform/bounded.ts";
import { listenForever, settle } from "../platform/pg-listen.ts";

const channel = "credential_changed";

/**
 * The cache is used only while the LISTEN connection has confirmed, within this long, that it is
 * current. settle() waits this long for a process to answer before it cuts it, so once settle()
 * returns, a process that could not answer (a silent network, a stuck connection) has stopped
 * using its cache too, whether or not it has heard that it was cut.
 */
const trustMs = 5000;
/** Heartbeats on the LISTEN connection: several within trustMs, so a slow one loses nothing. */
const heartbeatEveryMs = 1000;

/** The credential tables' rows, cached by kind and secret hash. */
export type CredentialKind = "api_key" | "internal" | "site" | "cashier";

interface Entry {
  row: unknown;
  at: number;
  /** The row's own expiry (wall clock, ms; Infinity: none): a cached row never outlives it. */
  expiresAt: number;
}

export interface CredentialCacheOptions {
  /** A belt to the braces of the notifications: an entry is read again after this long. */
  ttlMs?: number;
  maxEntries?: number;
  /** The clock of ttlMs and of the listener's confirmations (performance.now()). */
  now?: () => number;
  /** The clock of the rows' own expiries (Date.now()). */
  wallNow?: () => number;
}

/**
 * The credential rows this process has verified, so that a request does not query its
 * credential. Revocation still takes effect at once in every process: every change to a
 * credential row is announced on credential_changed (a trigger, at commit), and each process
 * drops that credential when told. The cache is used only while this process listens: while
 * the LISTEN connection is down, and until it is back (PostgreSQL keeps no notifications for
 * a listener that is away), every request reads its credential, and the cache starts empty.
 * Nor is it used once the connection has gone 5 s without confirming that it is current (a
 * heartbeat each second): a process cut off without being told (a silent network) stops using
 * its cache within 5 s all the same.
 *
 * "At once" holds for whoever changes a credential and then calls settleCredentialChanges (the
 * admin CLI does): it returns only when every process has dropped what it held, or has stopped
 * using its cache.
 *
 * A lookup that raced a notification (read before the change committed, finished after the
 * notification arrived) is not cached: each notification bumps a generation, and a row is
 * stored only if the generation did not move while it was read.
 */
export class CredentialCache {
  #entries = new Map<string, Entry>();
  #generation = 0;
  #listening = false;
  /** When the latest confirmation that this cache is current was sent (see Heartbeat.onConfirmed). */
  #confirmedAt = -Infinity;
  readonly #ttlMs: number;
  readonly #maxEntries: number;
  readonly #now: () => number;
  readonly #wallNow: () => number;

  constructor(o: CredentialCacheOptions = {}) {
    this.#ttlMs = o.ttlMs ?? 300_000;
    this.#maxEntries = o.maxEntries ?? 10_000;
    this.#now = o.now ?? (() => performance.now());
    this.#wallNow = o.wallNow ?? (() => Date.now());
  }

  /** Listening, and confirmed current within trustMs. */
  #usable(): boolean {
    return this.#listening && this.#now() - this.#confirmedAt < trustMs;
  }

  /**
   * The cached row, or `load()`'s (undefined: no such credential, never cached). `expiresAt` gives
   * a row's own expiry (wall clock, ms; null: none): a row is not served from the cache from then
   * on, but read again (and an expired row is not cached at all).
   */
  async lookup<T>(kind: CredentialKind, secretHash: string, load: () => Promise<T | undefined>, expiresAt?: (row: T) => number | null): Promise<T | undefined> {
    const key = `${kind}:${secretHash}`;
    const entry = this.#entries.get(key);
    if (entry !== undefined && this.#usable() && this.#now() - entry.at < this.#ttlMs && this.#wallNow() < entry.expiresAt) return entry.row as T;
    if (entry !== undefined) this.#entries.delete(key);
    const generation = this.#generation;
    const row = await load();
    const rowExpiresAt = row === undefined ? Infinity : (expiresAt?.(row) ?? Infinity);
    if (row !== undefined && this.#usable() && generation === this.#generation && this.#wallNow() < rowExpiresAt) {
      setBounded(this.#entries, key, { row, at: this.#now(), expiresAt: rowExpiresAt }, this.#maxEntries);
    }
    return row;
  }

  /** A credential changed (its secret hash), or, with none, any may have: drop what is cached. */
  invalidate(secretHash?: string): void {
    this.#generation++;
    if (secretHash === undefined) {
      this.#entries.clear();
      return;
    }
    for (const kind of ["api_key", "internal", "site", "cashier"] as const) this.#entries.delete(`${kind}:${secretHash}`);
  }

  get size(): number {
    return this.#entries.size;
  }

  /** Called when the LISTEN is in place (again): what was missed meanwhile is unknown, so start empty. */
  listening(): void {
    this.invalidate();
    this.#listening = true;
    // Empty, it holds nothing older than now; what commits from here on is announced.
    this.#confirmedAt = this.#now();
  }

  /** Called when the LISTEN connection is lost: stop using the cache. */
  lost(): void {
    this.#listening = false;
    this.#confirmedAt = -Infinity;
    this.invalidate();
  }

  /** Every change committed before `sentAt` (this cache's clock) has been heard of. */
  confirmed(sentAt: number): void {
    this.#confirmedAt = Math.max(this.#confirmedAt, sentAt);
  }

  /** Listens for credential_changed on a connection of its own, for as long as it runs. */
  listen(databaseUrl: string, logger: Logger): { stop(): Promise<void> } {
    const listener = listenForever({
      databaseUrl,
      channel,
      logger,
      what: "credential cache LISTEN connection",
      onNotification: (hash) => this.invalidate(hash || undefined),
      onListening: () => this.listening(),
      onLost: () => this.lost(),
      heartbeat: { everyMs: heartbeatEveryMs, timeoutMs: 2 * trustMs, onConfirmed: (sentAt) => this.confirmed(sentAt) },
    });
    return {
      stop: async () => {
        this.lost();
        await listener.stop();
      },
    };
  }
}

/**
 * Returns once every process's cache has heard of every credential change committed before the
 * call, so that the next request anywhere is answered from the database's current rows. A
 * process that does not confirm within trustMs has its LISTEN connection cut, and by then has
 * stopped using its cache anyway (no confirmation for that long); the pids of those are returned.
 */
export async function settleCredentialChanges(databaseUrl: string): Promise<number[]> {
  return (await settle(databaseUrl, channel, { timeoutMs: trustMs })).cut;
}
