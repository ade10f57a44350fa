import { readFileSync } from "node:fs";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import pg from "pg";
import { from as copyFrom } from "pg-copy-streams";
import { createApiKey, createMerchant } from "../../../services/auth/admin.ts";
import type { BenchContext, RunResult, Scenario } from "../types.ts";

/**
 * The bookkeeping export (GET …/payment-intents/export) of a million rows (20k in --quick mode):
 * intents of a merchant of its own bulk-loaded with COPY, a quarter of them paid (one chain output
 * each), then the whole export read through the REST gateway as fast as the client takes it.
 * Reports rows per second and how far the service process's resident memory rose above where it
 * was before (sampled every 50 ms): the export reads the database in keyset batches and writes
 * as the client reads, so that growth stays flat however many rows there are.
 */

const rowsFor = (ctx: BenchContext) => (ctx.quick ? 20_000 : 1_000_000);
const day = 86_400_000;

interface State {
  merchant: string;
  key: string;
  rows: number;
  loadSeconds: number;
}
let current: State | undefined;

/** Intents and their outputs in COPY text format, oldest first, one distinct millisecond apart over the last 30 days. */
function* intentRows(merchant: string, n: number, now: number) {
  const oldest = now - 30 * day;
  const step = (30 * day - 60_000) / n;
  let chunk = "";
  for (let i = 0; i < n; i++) {
    const created = new Date(oldest + Math.floor(i * step)).toISOString();
    const expires = new Date(oldest + Math.floor(i * step) + 900_000).toISOString();
    const paid = i % 4 === 0;
    const id = `pi_export${String(i).padStart(17, "0")}`;
    chunk += `${id}\t${merchant}\ttest\t${paid ? "confirmed" : "expired"}\torder-${i}\tethereum\tUSDC\t12.50\t{}\t${created}\t${expires}\t${created}\t${paid ? "12.50" : "\\N"}\n`;
    if ((i + 1) % 4096 === 0) yield chunk, (chunk = "");
  }
  if (chunk) yield chunk;
}

function* outputRows(n: number, now: number) {
  const oldest = now - 30 * day;
  const step = (30 * day - 60_000) / n;
  let chunk = "";
  for (let i = 0; i < n; i += 4) {
    const seen = new Date(oldest + Math.floor(i * step) + 30_000).toISOString();
    const hash = `b${i.toString(16)}`.padStart(64, "0");
    chunk += `ethereum\ttest\tUSDC\t0xexport${i}\t${hash}\t0\t12.50\t20\t${1_000_000 + i}\t${hash}\t${seen}\tpi_export${String(i).padStart(17, "0")}\tt\t${seen}\t${seen}\n`;
    if ((i / 4 + 1) % 4096 === 0) yield chunk, (chunk = "");
  }
  if (chunk) yield chunk;
}

/** The resident set of a process, in bytes (Linux /proc); undefined elsewhere. */
function rssOf(pid: number): number | undefined {
  try {
    const kb = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1];
    return kb === undefined ? undefined : Number(kb) * 1024;
  } catch {
    return undefined;
  }
}

/**
 * Reads the whole export, counting its lines as they come (nothing kept); the service's peak RSS
 * meanwhile, and as it was when half the rows had come: memory that is flat stops rising once
 * the heap has grown to its working size, so the second half adds (almost) nothing.
 */
async function readExport(ctx: BenchContext, s: State): Promise<{ lines: number; seconds: number; firstByteMs: number; peakRss: number; baseRss: number; halfRss: number }> {
  const baseRss = rssOf(ctx.servicePid) ?? Number.NaN;
  let peakRss = baseRss;
  const sampler = setInterval(() => (peakRss = Math.max(peakRss, rssOf(ctx.servicePid) ?? Number.NaN)), 50);
  const started = performance.now();
  try {
    const res = await fetch(`${ctx.base}/api/v1/merchants/${s.merchant}/payment-intents/export`, { headers: { authorization: `Bearer ${s.key}` } });
    if (res.status !== 200 || !res.body) throw new Error(`export: HTTP ${res.status} ${await res.text()}`);
    const firstByteMs = performance.now() - started;
    let lines = 0;
    let halfRss: number | undefined;
    for await (const chunk of res.body as AsyncIterable<Uint8Array>) {
      for (let i = 0; i < chunk.length; i++) if (chunk[i] === 10) lines++;
      if (halfRss === undefined && lines >= s.rows / 2) halfRss = Math.max(peakRss, rssOf(ctx.servicePid) ?? Number.NaN);
    }
    return { lines, seconds: (performance.now() - started) / 1000, firstByteMs, peakRss: Math.max(peakRss, rssOf(ctx.servicePid) ?? Number.NaN), baseRss, halfRss: halfRss ?? Number.NaN };
  } finally {
    clearInterval(sampler);
  }
}

export const exportScenario: Scenario = {
  name: "export",
  title: "CSV export of 1M rows: rows/s and the service's memory (flat)",
  metrics: {
    rows: { label: "rows exported (--quick: 20k, not 1M)", unit: "rows" },
    rows_per_s: { label: "rows per second, REST, one client reading as fast as it can", unit: "rows/s" },
    first_byte_ms: { label: "time to the first byte (the header line)", unit: "ms" },
    rss_growth_mb: { label: "service process: peak RSS during the export above its RSS before it (the heap growing to its working size)", unit: "MB" },
    rss_second_half_mb: { label: "service process: peak RSS growth during the export's second half (flat: about 0)", unit: "MB", target: { op: "<=", value: 16 } },
    load_seconds: { label: "bulk load: COPY intents and outputs, VACUUM ANALYZE", unit: "s" },
  },

  async setup(ctx) {
    const n = rowsFor(ctx);
    const em = ctx.db.em.fork();
    const merchant = await createMerchant(em, "Bench Export Shop");
    const key = await createApiKey(em, merchant.id, "test", ["payment_intents:read"]);
    const client = new pg.Client({ connectionString: ctx.databaseUrl });
    await client.connect();
    const t0 = performance.now();
    try {
      const now = Date.now();
      ctx.log(`export: loading ${n} intents (a quarter paid) for ${merchant.id} with COPY`);
      await pipeline(
        Readable.from(intentRows(merchant.id, n, now), { objectMode: false }),
        client.query(copyFrom(`COPY payment_intents (id, merchant_id, environment, status, merchant_reference, network, asset, requested_amount, metadata, created_at, expires_at, updated_at, amount_received) FROM STDIN`)),
      );
      await pipeline(
        Readable.from(outputRows(n, now), { objectMode: false }),
        client.query(copyFrom(`COPY chain_observations (network, environment, asset, to_address, tx_hash, output_index, amount, confirmations, block_height, block_hash, observed_at, payment_intent_id, counted, created_at, updated_at) FROM STDIN`)),
      );
      await client.query("VACUUM (ANALYZE) payment_intents, chain_observations");
    } finally {
      await client.end();
    }
    current = { merchant: merchant.id, key: key.api_key, rows: n, loadSeconds: (performance.now() - t0) / 1000 };
    ctx.log(`export: loaded in ${current.loadSeconds.toFixed(1)} s`);
  },

  async run(ctx) {
    const s = current;
    if (!s) throw new Error("export: setup has not run");
    const r = await readExport(ctx, s);
    // The header line, then one row per intent (each paid one has one output).
    if (r.lines !== s.rows + 1) throw new Error(`export: ${r.lines} lines, expected ${s.rows + 1}`);
    const result: RunResult = {
      rows: s.rows,
      rows_per_s: s.rows / r.seconds,
      first_byte_ms: r.firstByteMs,
      rss_growth_mb: (r.peakRss - r.baseRss) / 2 ** 20,
      rss_second_half_mb: (r.peakRss - r.halfRss) / 2 ** 20,
      load_seconds: s.loadSeconds,
    };
    return result;
  },
};
