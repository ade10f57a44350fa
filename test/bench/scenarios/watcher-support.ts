// What the chain watcher scenarios share: the watcher as its own process against the main
// system's rpc role, waits with deadlines, and open intents loaded in bulk to be watched.
import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { from as copyFrom } from "pg-copy-streams";
import { newIds } from "../../../services/platform/ids.ts";
import type { BenchContext } from "../types.ts";

const root = path.resolve(import.meta.dirname, "../../..");

/** One watcher process at a time, started with the node URLs in `env`; its output kept for errors. */
export class WatcherProcess {
  #w: { child: ChildProcess; output: () => string } | undefined;
  readonly #name: string;
  constructor(name: string) {
    this.#name = name;
  }

  start(ctx: BenchContext, credential: string, env: Record<string, string>): void {
    const child = spawn(process.execPath, [path.join(root, "services/app/main.ts"), "watcher"], {
      cwd: root,
      env: {
        PATH: process.env.PATH,
        RPC_URL: ctx.rpcUrl,
        WATCHER_CREDENTIAL_TEST: credential,
        WATCHER_LEASE_SECONDS: "5",
        OPS_PORT: "0",
        LOG_LEVEL: "info",
        // BENCH_PROFILE_DIR: the watcher writes its profile there too, as the service's processes do.
        ...(ctx.env.NODE_OPTIONS?.includes("--cpu-prof") ? { NODE_OPTIONS: ctx.env.NODE_OPTIONS } : {}),
        ...env,
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout?.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr?.on("data", (d: Buffer) => (out += d.toString()));
    this.#w = { child, output: () => out };
  }

  /** The running watcher's process id (its CPU time, cpu.ts). */
  get pid(): number | undefined {
    return this.#w?.child.pid;
  }

  following(): boolean {
    return /following the chain/.test(this.#w?.output() ?? "");
  }

  async stop(): Promise<void> {
    const w = this.#w;
    this.#w = undefined;
    if (!w || w.child.exitCode !== null) return;
    await new Promise<void>((resolve) => {
      w.child.once("exit", () => resolve());
      w.child.kill("SIGTERM");
    });
  }

  async until(what: string, check: () => Promise<boolean> | boolean, timeoutMs: number, stepMs = 20): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error(`${this.#name}: ${what} did not happen within ${timeoutMs} ms${this.#w ? `; watcher output: ${this.#w.output().slice(-800)}` : ""}`);
      await sleep(stepMs);
    }
  }
}

/**
 * A count of the observations recorded on a network's Test chain (not the sandbox's) after the
 * observation `afterId` (lastObservationId), polled every 20 ms while a catch-up is timed. A poll
 * reads the chain's watcher row first (one row by its key) and counts observations only when that
 * row was written again (its `xmin`, the transaction that wrote it, changed): a report writes its
 * observations and the row in one transaction, so nothing new can be counted before the row
 * changes. Counting on every poll took 8 ms a count, as PostgreSQL logged it, while a report's
 * uncommitted rows sat in the index (each checked for visibility), on the connection whose CPU
 * the scenario counts as PostgreSQL's. Each count takes only the rows after the newest it saw: a
 * chain's reports are recorded one at a time under its watcher's lock, so its observations commit
 * in the order of their ids and none appears later below one already seen.
 */
export function recordedSince(ctx: BenchContext, network: string, afterId: number): () => Promise<number> {
  let last = afterId;
  let total = 0;
  let seen: string | undefined;
  return async () => {
    const em = ctx.db.em.fork();
    const [watcher] = await em.execute<{ version: string }[]>(`select xmin::text as version from chain_watchers where network = ? and environment = 'test'`, [network]);
    if (watcher === undefined || watcher.version === seen) return total;
    seen = watcher.version;
    const [row] = await em.execute<{ n: string; last: string | null }[]>(
      `select count(*) as n, max(id) as last from chain_observations where id > ? and network = ? and environment = 'test' and not simulated`,
      [last, network],
    );
    total += Number(row?.n ?? 0);
    if (row?.last) last = Number(row.last);
    return total;
  };
}

/** The id of the newest observation (0: none), for recorded's afterId. */
export async function lastObservationId(ctx: BenchContext): Promise<number> {
  const [row] = await ctx.db.em.fork().execute<{ id: string | null }[]>(`select max(id) as id from chain_observations`);
  return Number(row?.id ?? 0);
}

/** Observations on the network not yet counted. */
export async function uncounted(ctx: BenchContext, network: string): Promise<number> {
  const [row] = await ctx.db.em.fork().execute<{ n: string }[]>(`select count(*) as n from chain_observations where not counted and not simulated and network = ?`, [network]);
  return Number(row?.n ?? 0);
}

/** When the observation of `txHash` on a network's Test chain was recorded (ms since the epoch), if it was. */
export async function recordedAt(ctx: BenchContext, network: string, txHash: string): Promise<number | undefined> {
  // By the unique key's columns, so that a probe every few milliseconds is an index lookup, not a scan.
  const [row] = await ctx.db.em
    .fork()
    .execute<{ created_at: Date }[]>(`select created_at from chain_observations where network = ? and environment = 'test' and tx_hash = ? limit 1`, [network, txHash]);
  return row && new Date(row.created_at).getTime();
}

/** Open Test intents of the bench merchant, one per address, loaded with COPY. */
export async function loadWatchedIntents(ctx: BenchContext, intent: { network: string; asset: string; amount: string }, addresses: readonly string[]): Promise<void> {
  const client = new pg.Client({ connectionString: ctx.databaseUrl });
  await client.connect();
  try {
    const t0 = performance.now();
    const ids = newIds("pi", addresses.length);
    const now = new Date().toISOString();
    const expires = new Date(Date.now() + 86_400_000).toISOString();
    const copy = client.query(
      copyFrom(`COPY payment_intents (id, merchant_id, environment, status, network, asset, requested_amount, metadata, deposit_address, created_at, expires_at, updated_at) FROM STDIN`),
    );
    const rows = function* () {
      for (let i = 0; i < ids.length; i += 1000) {
        let chunk = "";
        for (let j = i; j < Math.min(ids.length, i + 1000); j++) {
          chunk += `${ids[j]}\t${ctx.merchant.id}\ttest\tpending\t${intent.network}\t${intent.asset}\t${intent.amount}\t{}\t${addresses[j]}\t${now}\t${expires}\t${now}\n`;
        }
        yield chunk;
      }
    };
    await pipeline(Readable.from(rows(), { objectMode: false }), copy);
    await client.query("VACUUM (ANALYZE) payment_intents");
    ctx.log(`${intent.network} watcher: ${addresses.length} watched intents loaded in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  } finally {
    await client.end();
  }
}
