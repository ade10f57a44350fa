/**
 * The only writer of api_key_last_uses: when each API key last authenticated a call, without a
 * database write per request. A process remembers when it last recorded each key and records a
 * key again only a minute later (so a busy key costs one write a minute per process, not one per
 * call); what is due is written in one statement, after the call that made it due has been
 * answered (fire-and-forget: a last-use time is worth no request's latency, and one lost to a
 * crash or an outage is the next minute's to write). Several processes may write the same key:
 * the later time wins.
 */
import type { Database } from "../platform/db.ts";
import type { Logger } from "../platform/logger.ts";
import { OutageLog } from "../platform/outage.ts";
import { setBounded } from "../platform/bounded.ts";

/** A key's last use is recorded at most this often per process: a list shows it to the minute. */
export const lastUseEveryMs = 60_000;

export class KeyLastUse {
  /** When this process last recorded each key (performance clock). */
  #recorded = new Map<string, number>();
  /** Keys used since their last recording, with when (wall clock), waiting for the next write. */
  #due = new Map<string, Date>();
  #writing: Promise<void> | undefined;
  readonly #db: Database;
  readonly #outage: OutageLog;
  readonly #now: () => number;

  constructor(db: Database, logger: Logger, o: { now?: () => number } = {}) {
    this.#db = db;
    this.#outage = new OutageLog(logger, "API key last-use recording");
    this.#now = o.now ?? (() => performance.now());
  }

  /** A call was authenticated with this key (its id, never its secret). */
  seen(keyId: string): void {
    const at = this.#now();
    const last = this.#recorded.get(keyId);
    if (last !== undefined && at - last < lastUseEveryMs) return;
    // Bounded: a process that sees many keys forgets the oldest and records them again, no harm.
    setBounded(this.#recorded, keyId, at, 100_000);
    this.#due.set(keyId, new Date());
    // Written once this call's turn of the event loop is over: never on the request's path.
    if (this.#writing === undefined) this.#writing = new Promise((resolve) => setImmediate(resolve)).then(() => this.#write());
  }

  async #write(): Promise<void> {
    try {
      while (this.#due.size > 0) {
        const batch = [...this.#due];
        this.#due.clear();
        try {
          await this.#db.em.fork().execute(
            `insert into api_key_last_uses (api_key_id, last_used_at)
             select u.id, u.at from unnest(?::text[], ?::timestamptz[]) as u(id, at) join api_keys k on k.id = u.id
             on conflict (api_key_id) do update set last_used_at = greatest(api_key_last_uses.last_used_at, excluded.last_used_at)`,
            [`{${batch.map(([id]) => id).join(",")}}`, `{${batch.map(([, at]) => at.toISOString()).join(",")}}`],
          );
          this.#outage.recovered();
        } catch (err) {
          // Not written: each key is recorded again at its first call a minute on (not at every
          // call meanwhile, which an outage would turn into a write attempt per request).
          this.#outage.failed(err);
          return;
        }
      }
    } finally {
      this.#writing = undefined;
    }
  }

  /** Waits for what is due to be written (a clean stop; tests). */
  async flush(): Promise<void> {
    while (this.#writing !== undefined) await this.#writing;
  }
}
