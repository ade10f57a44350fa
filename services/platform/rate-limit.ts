import pg from "pg";
import type { Logger } from "./logger.ts";
import { OutageLog } from "./outage.ts";
import { PooledClient } from "./pg-client.ts";

/** One budget's check: 0 if the call may go on, else the whole seconds until one may (at least 1). */
export interface Limiter {
  take(client: string): Promise<number>;
}

/** Buckets kept in one process at most: past it the least recently used goes (a full one, most likely). */
const maxLocalBuckets = 100_000;

/**
 * A token bucket per client (an API key, a client address): it holds at most `limit` calls and
 * refills evenly, `limit` every `seconds` (100 a second: one call every 10 ms, and a burst of 100
 * after a quiet second). In memory, in this process: the shared buckets' fallback, and their
 * model. Memory is bounded: full buckets are dropped once a minute, and past `maxBuckets` the
 * least recently used one goes (at worst a client then starts again from a full bucket).
 */
export class TokenBuckets {
  readonly limit: number;
  private readonly perMs: number;
  private readonly maxBuckets: number;
  private buckets = new Map<string, { tokens: number; at: number }>();
  private sweptAt = 0;

  constructor(limit: number, seconds = 1, maxBuckets = maxLocalBuckets) {
    this.limit = limit;
    this.perMs = limit / (seconds * 1000);
    this.maxBuckets = maxBuckets;
  }

  get size(): number {
    return this.buckets.size;
  }

  /** Takes one call for `client`: 0 if allowed, else the whole seconds until one is (at least 1). */
  take(client: string, now = Date.now()): number {
    this.sweep(now);
    const bucket = this.buckets.get(client);
    const tokens = bucket ? Math.min(this.limit, bucket.tokens + Math.max(0, now - bucket.at) * this.perMs) : this.limit;
    // Deleted and set again: the map's order is then least recently used first.
    this.buckets.delete(client);
    if (this.buckets.size >= this.maxBuckets) this.buckets.delete(this.buckets.keys().next().value as string);
    if (tokens < 1) {
      this.buckets.set(client, { tokens, at: now });
      return retryAfterSeconds(tokens, this.perMs * 1000);
    }
    this.buckets.set(client, { tokens: tokens - 1, at: now });
    return 0;
  }

  /** Drops the buckets that have refilled, at most once a minute. */
  private sweep(now: number): void {
    if (now - this.sweptAt < 60_000) return;
    this.sweptAt = now;
    for (const [client, b] of this.buckets) if (b.tokens + (now - b.at) * this.perMs >= this.limit) this.buckets.delete(client);
  }
}

/** Whole seconds until a bucket holding `tokens` (< 1) refilling `perSecond` has one: at least 1. */
function retryAfterSeconds(tokens: number, perSecond: number): number {
  return Math.max(1, Math.ceil((1 - tokens) / perSecond));
}

/** Runs one statement on the shared database, outside any transaction. */
export type RunStatement = <T>(sql: string, params: readonly unknown[]) => Promise<T[]>;

export interface SharedBucketsOptions {
  /** How long a take may wait for the database before this process counts locally instead. */
  timeoutMs?: number;
  /** After a failure, how long takes stay local before the database is tried again. */
  localForMs?: number;
  /** How many processes share the traffic: while the database cannot be reached each keeps 1/n of a budget. */
  processes?: number;
  now?: () => number;
}

/**
 * The token buckets of every process in one table (rate_limit_buckets, UNLOGGED: they are worth
 * nothing after a crash), so a budget is the same with one rpc process or several. A take is one
 * statement: it refills the bucket by the time since its last call, by the database's clock, takes
 * as many tokens as there are for the calls asking (a process sends the calls of one client that
 * queue behind a take together), and returns what is left, so the Retry-After of a refusal is the
 * same whichever process answers. Refused calls take nothing.
 *
 * When the database does not answer within `timeoutMs` (or fails), the process counts in its own
 * buckets, each budget divided by `processes`, for `localForMs` before it tries the database
 * again: a limit is never lifted, and never costs every call a timeout.
 */
export class SharedBuckets {
  readonly #run: RunStatement | undefined;
  readonly #timeoutMs: number;
  readonly #localForMs: number;
  readonly #processes: number;
  readonly #now: () => number;
  readonly #outage: OutageLog;
  #localUntil = 0;
  #sweptAt = 0;

  /** `run` undefined: no shared store (RATE_LIMIT_STORE=local), every take counted in this process. */
  constructor(run: RunStatement | undefined, logger: Logger, o: SharedBucketsOptions = {}) {
    this.#run = run;
    this.#timeoutMs = o.timeoutMs ?? defaultTimeoutMs;
    this.#localForMs = o.localForMs ?? 5_000;
    this.#processes = Math.max(1, o.processes ?? 1);
    this.#now = o.now ?? Date.now;
    this.#outage = new OutageLog(logger, "shared rate limits");
  }

  /** Whether takes are counted locally at the moment (the database failed them lately). */
  get local(): boolean {
    return this.#run === undefined || this.#now() < this.#localUntil;
  }

  /** A budget of `limit` calls refilled evenly over `seconds`, named apart from the others in the table. */
  budget(name: string, limit: number, seconds: number): Limiter {
    const perSecond = limit / seconds;
    const fallback = new TokenBuckets(Math.max(1, Math.floor(limit / this.#processes)), seconds);
    // Calls of one client that arrive while its take is in flight go together in the next one: a
    // busy key costs the database one statement per round trip, not one per call queued on one row.
    const queues = new Map<string, ((wait: number) => void)[]>();
    const leases = new Leases(this.#now);
    const drain = async (client: string, queue: ((wait: number) => void)[]) => {
      while (queue.length > 0) {
        // Calls that queued while the last take was in flight are answered from what it leased first.
        while (queue.length > 0 && leases.use(client, false)) (queue.shift() as (wait: number) => void)(0);
        if (queue.length === 0) break;
        const batch = queue.splice(0, maxBatch);
        const ahead = leases.ahead(client, batch.length);
        const answer = await this.#take(`${name} ${client}`, limit, perSecond, batch.length, ahead, leases.giveBack(client));
        batch.forEach((resolve, i) => resolve(answer === undefined ? fallback.take(client, this.#now()) : i < answer.granted ? 0 : answer.wait));
        // Tokens granted past the calls waiting serve this client's next calls here, for a while.
        if (answer !== undefined && answer.granted > batch.length) leases.hold(client, answer.granted - batch.length);
      }
      queues.delete(client);
    };
    return {
      take: (client) => {
        if (this.local) {
          leases.clear();
          return Promise.resolve(fallback.take(client, this.#now()));
        }
        if (leases.use(client)) return Promise.resolve(0);
        return new Promise<number>((resolve) => {
          const queue = queues.get(client);
          if (queue) return void queue.push(resolve);
          const started = [resolve];
          queues.set(client, started);
          void drain(client, started);
        });
      },
    };
  }

  /**
   * Takes up to `n` tokens of one bucket, and up to `ahead` more while the bucket is over half
   * full, after putting back `back` tokens of a lease that lapsed: how many it gave (the first `n`
   * answer the calls waiting), and the wait for the calls it could not answer; undefined when the
   * store failed.
   */
  async #take(key: string, limit: number, perSecond: number, n: number, ahead = 0, back = 0): Promise<{ granted: number; wait: number } | undefined> {
    if (!this.#run) return undefined;
    const run = this.#run;
    let timer: NodeJS.Timeout | undefined;
    try {
      const rows = await Promise.race([
        run<{ tokens: number; granted: number }>(takeStatement, [key, limit, perSecond, n, ahead, back]),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error(`no answer within ${this.#timeoutMs} ms`)), this.#timeoutMs);
        }),
      ]);
      this.#outage.recovered();
      this.#sweep();
      const row = rows[0];
      if (!row) throw new Error("the bucket statement returned no row");
      const granted = Number(row.granted);
      return { granted, wait: granted >= n ? 0 : retryAfterSeconds(Number(row.tokens), perSecond) };
    } catch (err) {
      this.#outage.failed(err);
      this.#localUntil = this.#now() + this.#localForMs;
      return undefined;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Deletes the buckets that have refilled (as good as absent), at most once a minute from each process. */
  #sweep(): void {
    const now = this.#now();
    if (now - this.#sweptAt < 60_000) return;
    this.#sweptAt = now;
    this.#run?.(`delete from rate_limit_buckets where full_at < now()`, []).catch((err: unknown) => this.#outage.failed(err));
  }
}

// One statement per take of n tokens ($1 the bucket's key, $2 its size, $3 its refill a second,
// $4 the calls asking, $5 the tokens asked ahead for a lease, $6 the tokens of a lapsed lease put
// back). now() is the statement's start: a take that waited for the row lock of a later one must
// not move the bucket's clock back (greatest), nor refill by a negative time. It grants the calls
// what there is, and the lease only what lies above half the bucket: a client nearing its limit is
// counted call by call in every process, as without leases.
const refilled = `least($2::float8, b.tokens + greatest(0, extract(epoch from now() - b.at)::float8) * $3::float8 + $6::int)`;
const grantOf = (tokens: string) => `least($4::int + $5::int, floor(${tokens}), greatest($4::int, floor(${tokens} - $2::float8 / 2)))::int`;
const granted = grantOf(refilled);
// A new bucket is full: nothing a lapsed lease would put back ($6) fits in it.
const firstGrant = grantOf("$2::float8");
const takeStatement = `
insert into rate_limit_buckets as b (key, tokens, granted, at, full_at)
values ($1::text, $2::float8 - ${firstGrant}, ${firstGrant}, now(),
        now() + make_interval(secs => ${firstGrant} / $3::float8))
on conflict (key) do update set
  granted = ${granted},
  tokens = ${refilled} - ${granted},
  at = greatest(b.at, now()),
  full_at = greatest(b.at, now()) + make_interval(secs => ($2::float8 - (${refilled} - ${granted})) / $3::float8)
returning tokens, granted`;

/** The most calls of one client one statement answers. */
const maxBatch = 1_000;

/** How long tokens taken ahead serve a client's calls in this process, and the window its pace is counted over. */
const leaseMs = 100;

/** Clients whose pace a process keeps (the busiest, most recent ones); past it the least recently seen goes. */
const maxPaced = 10_000;

/**
 * Tokens a process took ahead for a client and answers its next calls from, without a statement:
 * as many as the client's calls in this process over the last window (`leaseMs`), so a key making
 * 300 calls a second costs the database some 10 statements a second, not 300; a client that calls
 * now and then asks for none ahead, and is counted call by call. A lease lasts `leaseMs`; what is
 * left of it then goes back to the bucket with the client's next take here (one statement still),
 * so only the last lease of a client that stops calling this process lapses unused. Leases are
 * only ever taken from the upper half of a bucket (takeStatement): a client nearing its limit is
 * never refused for tokens another process holds.
 */
class Leases {
  readonly #now: () => number;
  readonly #held = new Map<string, { tokens: number; until: number }>();
  /** What lapsed leases left, to put back with the client's next take. */
  readonly #unused = new Map<string, number>();
  readonly #pace = new Map<string, { since: number; calls: number; before: number }>();

  constructor(now: () => number) {
    this.#now = now;
  }

  /** Answers a call from the client's lease, if it holds a token still valid; `count`: a new call, counted in the client's pace. */
  use(client: string, count = true): boolean {
    const now = this.#now();
    if (count) this.#count(client, now);
    const lease = this.#held.get(client);
    if (!lease) return false;
    if (now >= lease.until || lease.tokens < 1) {
      this.#held.delete(client);
      const left = Math.floor(lease.tokens);
      if (left > 0) {
        if (this.#unused.size >= maxPaced) this.#unused.delete(this.#unused.keys().next().value as string);
        this.#unused.set(client, (this.#unused.get(client) ?? 0) + left);
      }
      return false;
    }
    lease.tokens -= 1;
    return true;
  }

  /** How many tokens to ask ahead, besides `waiting` calls: the client's calls in the last whole window, less those. */
  ahead(client: string, waiting: number): number {
    const pace = this.#pace.get(client);
    return pace ? Math.max(0, pace.before - waiting) : 0;
  }

  /** The tokens of the client's lapsed leases, once: the next take puts them back. */
  giveBack(client: string): number {
    const left = this.#unused.get(client) ?? 0;
    this.#unused.delete(client);
    return left;
  }

  hold(client: string, tokens: number): void {
    this.#held.delete(client);
    if (this.#held.size >= maxPaced) this.#held.delete(this.#held.keys().next().value as string);
    this.#held.set(client, { tokens, until: this.#now() + leaseMs });
  }

  clear(): void {
    this.#held.clear();
    this.#unused.clear();
  }

  /** Counts a call in the client's current window; a window over moves its count to `before` (a window skipped: none). */
  #count(client: string, now: number): void {
    const pace = this.#pace.get(client);
    this.#pace.delete(client);
    if (this.#pace.size >= maxPaced) this.#pace.delete(this.#pace.keys().next().value as string);
    if (!pace || now - pace.since >= 2 * leaseMs) return void this.#pace.set(client, { since: now, calls: 1, before: 0 });
    if (now - pace.since >= leaseMs) return void this.#pace.set(client, { since: now, calls: 1, before: pace.calls });
    pace.calls += 1;
    this.#pace.set(client, pace);
  }
}

/** How long a take may wait for the shared store (a connection, then its one statement) before the process counts locally. */
const defaultTimeoutMs = 5_000;

/** The most connections a process's takes use: one short statement each, so a few serve thousands a second. */
const bucketPoolSize = 4;

/**
 * Shared buckets on a pool of their own, so a take never queues behind the requests it limits
 * (a burst of creates holding every connection of the request pool would time every take out).
 */
export function sharedBucketsOn(databaseUrl: string, logger: Logger, o: SharedBucketsOptions = {}): { buckets: SharedBuckets; close: () => Promise<void> } {
  const timeoutMs = o.timeoutMs ?? defaultTimeoutMs;
  const pool = new pg.Pool({
    connectionString: databaseUrl,
    max: bucketPoolSize,
    Client: PooledClient,
    // The wait for a connection counts (pg's pool times its queue with this too): under a burst on
    // a busy host the takes queue, so the limit is set well above a take's few milliseconds.
    connectionTimeoutMillis: timeoutMs,
    // A take blocked on a row lock the server cannot get past is given up on by the server too.
    statement_timeout: Math.min(timeoutMs, 2_000),
  });
  // An idle connection cut by the server is reported here; the next take makes a new one.
  pool.on("error", () => undefined);
  // Named: each connection parses and plans the statement once.
  const run: RunStatement = async <T>(text: string, values: readonly unknown[]) =>
    (await pool.query({ name: text === takeStatement ? "rate_limit_take" : undefined, text, values: values as unknown[] })).rows as T[];
  return { buckets: new SharedBuckets(run, logger, { ...o, timeoutMs }), close: () => pool.end() };
}
