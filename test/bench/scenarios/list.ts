import { randomBytes } from "node:crypto";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import pg from "pg";
import { from as copyFrom } from "pg-copy-streams";
import { createMerchant } from "../../../services/auth/admin.ts";
import { canonicalJson } from "../../../services/platform/canonical-json.ts";
import { CursorCodec } from "../../../services/platform/cursor.ts";
import { deriveKey } from "../../../services/platform/secret-key.ts";
import { load } from "../load.ts";
import { percentile } from "../stats.ts";
import type { BenchContext, MetricSpec, RunResult, Scenario } from "../types.ts";

/**
 * Listing at 1M intents: the merchant's intents are bulk-loaded with COPY
 * (100k in --quick mode), plus a tenth as many for a second merchant, then each
 * filter is timed sequentially through the REST gateway, for its first page and
 * for a page deep in its results (a cursor signed like the service signs it).
 */

const pageSize = 50;
const day = 86_400_000;
const rowsFor = (ctx: BenchContext) => (ctx.quick ? 100_000 : 1_000_000);
const samplesFor = (ctx: BenchContext) => (ctx.quick ? 100 : 200);

// ---- bulk load ---------------------------------------------------------------

const statusWeights: [string, number][] = [
  ["pending", 60],
  ["confirmed", 15],
  ["expired", 10],
  ["cancelled", 8],
  ["underpaid", 5],
  ["overpaid", 2],
];
const statusTable: string[] = statusWeights.flatMap(([s, w]) => Array<string>(w).fill(s));

/** Valid network/asset pairs (services/intents/assets.ts), weighted, with a typical amount range and the decimals shown. */
const assetTable: { network: string; asset: string; max: number; decimals: number }[] = [
  ...Array(35).fill({ network: "ethereum", asset: "USDC", max: 5_000, decimals: 2 }),
  ...Array(20).fill({ network: "tron", asset: "USDT", max: 5_000, decimals: 2 }),
  ...Array(10).fill({ network: "ethereum", asset: "USDT", max: 5_000, decimals: 2 }),
  ...Array(10).fill({ network: "polygon", asset: "USDC", max: 2_000, decimals: 2 }),
  ...Array(8).fill({ network: "solana", asset: "USDC", max: 2_000, decimals: 2 }),
  ...Array(7).fill({ network: "bitcoin", asset: "BTC", max: 0.2, decimals: 8 }),
  ...Array(6).fill({ network: "ethereum", asset: "ETH", max: 3, decimals: 6 }),
  ...Array(4).fill({ network: "solana", asset: "SOL", max: 50, decimals: 4 }),
];

const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
let pool = randomBytes(0);
let poolAt = 0;

/** Same shape as newId("pi") (24 uniform base62 characters, rejection sampling), from a pooled random buffer. */
function fastIntentId(): string {
  let out = "pi_";
  while (out.length < 27) {
    if (poolAt >= pool.length) {
      pool = randomBytes(1 << 16);
      poolAt = 0;
    }
    const byte = pool[poolAt++]!;
    if (byte < 248) out += alphabet[byte % 62];
  }
  return out;
}

interface Loaded {
  /** Some of the merchant's intents, spread over the load, for the public_id and merchant_reference filters. */
  ids: string[];
  references: string[];
  /** created_at of the newest loaded row (epoch ms). */
  newest: number;
}

/**
 * Rows in COPY text format, oldest first, one distinct millisecond each over
 * the last 30 days; every 11th row belongs to the other merchant.
 */
function* copyRows(main: string, other: string, mainRows: number, loadedAt: number, out: Loaded, progress: (n: number) => void) {
  const total = mainRows + Math.floor(mainRows / 10);
  const newest = loadedAt - 60_000;
  const oldest = newest - 30 * day;
  const step = (newest - oldest) / total;
  const jitter = Math.max(1, Math.floor(step) - 1);
  // Open intents (pending, underpaid) must not be due, or the service's expiry
  // scheduler would start expiring hundreds of thousands of them mid-benchmark.
  const openUntil = new Date(loadedAt + day).toISOString();
  const sampleEvery = Math.floor(mainRows / 64);
  let mainSeen = 0;
  let chunk = "";
  for (let i = 0; i < total; i++) {
    const isMain = i % 11 !== 10;
    const created = oldest + Math.floor(i * step) + Math.floor(Math.random() * jitter);
    const createdText = new Date(created).toISOString();
    const status = statusTable[Math.floor(Math.random() * statusTable.length)]!;
    const a = assetTable[Math.floor(Math.random() * assetTable.length)]!;
    const amount = (Math.random() * a.max + 10 ** -a.decimals).toFixed(a.decimals);
    const reference = Math.random() < 0.7 ? `order-${i}` : null;
    const expires = status === "pending" || status === "underpaid" ? openUntil : new Date(created + 15 * 60_000).toISOString();
    const id = fastIntentId();
    if (isMain) {
      if (mainSeen % sampleEvery === sampleEvery >> 1) {
        out.ids.push(id);
        if (reference) out.references.push(reference);
      }
      mainSeen++;
    }
    out.newest = created;
    chunk += `${id}\t${isMain ? main : other}\ttest\t${status}\t${reference ?? "\\N"}\t${a.network}\t${a.asset}\t${amount}\t{}\t${createdText}\t${expires}\t${createdText}\n`;
    if ((i + 1) % 4096 === 0) {
      yield chunk;
      chunk = "";
    }
    if ((i + 1) % 250_000 === 0) progress(i + 1);
  }
  if (chunk) yield chunk;
}

// ---- filters and requests ----------------------------------------------------

/** The list query as service.ts builds it (before the limit), field for field. */
interface Query {
  status?: string;
  createdAfter?: Date;
  createdBefore?: Date;
  publicId?: string;
  merchantReference?: string;
}

interface Filter {
  key: string;
  label: string;
  /** Whether a page deep in its results is measured (not for filters matching a row or so). */
  deep: boolean;
  /** The query of request n (the point filters take a different intent each time). */
  query(n: number): Query;
}

const filters: Filter[] = [
  { key: "none", label: "no filter", deep: true, query: () => ({}) },
  { key: "status_pending", label: "status=pending", deep: true, query: () => ({ status: "pending" }) },
  { key: "status_cancelled", label: "status=cancelled", deep: true, query: () => ({ status: "cancelled" }) },
  { key: "merchant_reference", label: "merchant_reference=<one>", deep: false, query: (n) => ({ merchantReference: state().loaded.references[n % state().loaded.references.length] }) },
  { key: "public_id", label: "public_id=<one>", deep: false, query: (n) => ({ publicId: state().loaded.ids[n % state().loaded.ids.length] }) },
  { key: "created_range", label: "created range (1 day)", deep: true, query: () => ({ ...state().range }) },
  { key: "status_range", label: "status=pending + created range (1 day)", deep: true, query: () => ({ status: "pending", ...state().range }) },
];

function queryString(q: Query, cursor?: string): string {
  const p = new URLSearchParams({ limit: String(pageSize) });
  if (q.status !== undefined) p.set("status", q.status);
  if (q.createdAfter) p.set("created_after", q.createdAfter.toISOString());
  if (q.createdBefore) p.set("created_before", q.createdBefore.toISOString());
  if (q.publicId !== undefined) p.set("public_id", q.publicId);
  if (q.merchantReference !== undefined) p.set("merchant_reference", q.merchantReference);
  if (cursor !== undefined) p.set("cursor", cursor);
  return p.toString();
}

/** The same predicate as services/intents/store.ts listIntents, for counting and finding positions. */
function sqlWhere(merchantId: string, q: Query): { where: string; params: unknown[] } {
  const where = ["merchant_id = $1", "environment = 'test'"];
  const params: unknown[] = [merchantId];
  const add = (clause: string, value: unknown) => {
    params.push(value);
    where.push(clause.replace("?", `$${params.length}`));
  };
  if (q.status !== undefined) add("status = ?", q.status);
  if (q.createdAfter) add("created_at > ?", q.createdAfter);
  if (q.createdBefore) add("created_at < ?", q.createdBefore);
  if (q.publicId !== undefined) add("id = ?", q.publicId);
  if (q.merchantReference !== undefined) add("merchant_reference = ?", q.merchantReference);
  return { where: where.join(" and "), params };
}

/** The cursor binding exactly as intents/service.ts listPaymentIntents computes it: the owner and the filters. */
function cursorScope(merchantId: string, q: Query): string {
  const filters = {
    status: q.status,
    createdAfter: q.createdAfter,
    createdBefore: q.createdBefore,
    publicId: q.publicId,
    merchantReference: q.merchantReference,
  };
  return canonicalJson([merchantId, "test", filters]);
}

interface Deep {
  cursor: string;
  position: { t: number; i: string };
  /** Rows after the cursor position. */
  remaining: number;
}

interface State {
  rows: number;
  loadSeconds: number;
  loaded: Loaded;
  range: { createdAfter: Date; createdBefore: Date };
  /** Matches per filter (for the filters with deep pages). */
  counts: Record<string, number>;
  deep: Record<string, Deep>;
}

let current: State | undefined;
function state(): State {
  if (!current) throw new Error("list: setup has not run");
  return current;
}

interface ApiIntent {
  public_id: string;
  status: string;
  merchant_reference: string | null;
  created_at: string;
}

/** One GET of a page, timed from the request to the parsed body; throws unless it is a 200 with the page expected. */
async function fetchPage(ctx: BenchContext, f: Filter, q: Query, expected: number, deep?: Deep): Promise<number> {
  const url = `${ctx.base}/api/v1/merchants/${ctx.merchant.id}/payment-intents?${queryString(q, deep?.cursor)}`;
  const started = performance.now();
  const res = await fetch(url, { headers: { authorization: `Bearer ${ctx.merchant.key}` } });
  const body = (await res.json()) as { data?: ApiIntent[]; has_more?: boolean; next_cursor?: string | null; error?: { code: string } };
  const ms = performance.now() - started;
  const what = `list ${f.label}${deep ? " (deep page)" : ""}`;
  if (res.status !== 200) {
    const hint = body.error?.code === "invalid_cursor" ? " (the bench's cursor binding differs from the service's)" : "";
    throw new Error(`${what}: HTTP ${res.status} ${JSON.stringify(body).slice(0, 300)}${hint}`);
  }
  const data = body.data;
  if (!Array.isArray(data)) throw new Error(`${what}: no data array in ${JSON.stringify(body).slice(0, 300)}`);
  const want = Math.min(pageSize, expected);
  if (data.length !== want) throw new Error(`${what}: ${data.length} intents, expected ${want}`);
  if (body.has_more !== expected > pageSize || (body.next_cursor != null) !== body.has_more) {
    throw new Error(`${what}: has_more ${body.has_more} / next_cursor ${body.next_cursor} with ${expected} expected matches`);
  }
  let previous = deep ? deep.position.t : Number.POSITIVE_INFINITY;
  for (const item of data) {
    const t = Date.parse(item.created_at);
    const ok =
      t <= previous &&
      (q.status === undefined || item.status === q.status) &&
      (q.createdAfter === undefined || t > q.createdAfter.getTime()) &&
      (q.createdBefore === undefined || t < q.createdBefore.getTime()) &&
      (q.publicId === undefined || item.public_id === q.publicId) &&
      (q.merchantReference === undefined || item.merchant_reference === q.merchantReference);
    if (!ok) throw new Error(`${what}: intent ${JSON.stringify(item)} does not belong on this page`);
    previous = t;
  }
  return ms;
}

/** The filter's expected match count for request n (point filters: one intent each). */
function matches(f: Filter): number {
  return f.deep ? state().counts[f.key]! : 1;
}

async function measure(ctx: BenchContext, f: Filter, samples: number, deep: boolean): Promise<number[]> {
  const times: number[] = [];
  const d = deep ? state().deep[f.key] : undefined;
  for (let n = 0; n < samples; n++) {
    times.push(await fetchPage(ctx, f, f.query(n), d ? d.remaining : matches(f), d));
  }
  return times;
}

const concurrentConnections = 8;

function metricSpecs(): Record<string, MetricSpec> {
  const specs: Record<string, MetricSpec> = {};
  const p99Target = { op: "<=", value: 20 } as const;
  for (const f of filters) {
    specs[`${f.key}_first_p50`] = { label: `${f.label}, first page, p50`, unit: "ms" };
    specs[`${f.key}_first_p99`] = { label: `${f.label}, first page, p99`, unit: "ms", target: p99Target };
    if (!f.deep) continue;
    specs[`${f.key}_deep_p50`] = { label: `${f.label}, deep page (middle of the matches), p50`, unit: "ms" };
    specs[`${f.key}_deep_p99`] = { label: `${f.label}, deep page (middle of the matches), p99`, unit: "ms", target: p99Target };
  }
  specs.concurrent_rps = { label: `no filter, first page, ${concurrentConnections} connections: requests/s`, unit: "req/s" };
  specs.concurrent_p99 = { label: `no filter, first page, ${concurrentConnections} connections: p99`, unit: "ms" };
  specs.rows = { label: "intents of the merchant (Test); --quick loads 100k, not 1M", unit: "rows" };
  specs.load_seconds = { label: "bulk load: COPY (merchant + 10% for another), VACUUM ANALYZE, CHECKPOINT", unit: "s" };
  return specs;
}

export const listScenario: Scenario = {
  name: "list",
  title: "List Payment Intents with filters at 1M intents",
  metrics: metricSpecs(),

  async setup(ctx) {
    const mainRows = rowsFor(ctx);
    const other = await createMerchant(ctx.db.em.fork(), "Bench Other Shop");
    const client = new pg.Client({ connectionString: ctx.databaseUrl });
    await client.connect();
    try {
      const loadedAt = Date.now();
      const loaded: Loaded = { ids: [], references: [], newest: 0 };
      ctx.log(`list: loading ${mainRows} intents for ${ctx.merchant.id} and ${Math.floor(mainRows / 10)} for ${other.id} with COPY`);
      const t0 = performance.now();
      const copy = client.query(
        copyFrom(
          `COPY payment_intents (id, merchant_id, environment, status, merchant_reference, network, asset,
             requested_amount, metadata, created_at, expires_at, updated_at) FROM STDIN`,
        ),
      );
      const rows = copyRows(ctx.merchant.id, other.id, mainRows, loadedAt, loaded, (n) => ctx.log(`list: ${n} rows copied (${((performance.now() - t0) / 1000).toFixed(1)} s)`));
      await pipeline(Readable.from(rows, { objectMode: false }), copy);
      const copySeconds = (performance.now() - t0) / 1000;
      // VACUUM as autovacuum would after a bulk insert (visibility map, hint bits), so it does not run
      // mid-measurement, and a CHECKPOINT so the load's dirty pages are not being written out either.
      await client.query("VACUUM (ANALYZE) payment_intents");
      await client.query("CHECKPOINT");
      const loadSeconds = (performance.now() - t0) / 1000;
      ctx.log(`list: COPY ${copySeconds.toFixed(1)} s, with VACUUM ANALYZE and CHECKPOINT ${loadSeconds.toFixed(1)} s`);

      const count = async (q: Query) => {
        const { where, params } = sqlWhere(ctx.merchant.id, q);
        const r = await client.query<{ n: string }>(`select count(*) as n from payment_intents where ${where}`, params);
        return Number(r.rows[0]!.n);
      };
      // One day ten days back, well inside the loaded month.
      const before = new Date(loaded.newest - 9 * day);
      current = {
        rows: await count({}),
        loadSeconds,
        loaded,
        range: { createdAfter: new Date(before.getTime() - day), createdBefore: before },
        counts: {},
        deep: {},
      };
      const codec = new CursorCodec(deriveKey(ctx.masterKey, "list-cursor"));
      for (const f of filters.filter((f) => f.deep)) {
        const q = f.query(0);
        const n = await count(q);
        const offset = Math.floor(n / 2);
        const { where, params } = sqlWhere(ctx.merchant.id, q);
        const r = await client.query<{ created_at: Date; id: string }>(
          `select created_at, id from payment_intents where ${where} order by created_at desc, id desc offset ${offset} limit 1`,
          params,
        );
        const row = r.rows[0];
        if (!row || n - offset - 1 < pageSize) throw new Error(`list: too few matches (${n}) for a deep page of ${f.label}`);
        const position = { t: row.created_at.getTime(), i: row.id };
        current.counts[f.key] = n;
        current.deep[f.key] = { cursor: codec.encode(cursorScope(ctx.merchant.id, q), position), position, remaining: n - offset - 1 };
        ctx.log(`list: ${f.label}: ${n} matches, deep page after #${offset}`);
      }
    } finally {
      await client.end();
    }
  },

  async warmup(ctx) {
    const n = ctx.quick ? 20 : 50;
    for (const f of filters) {
      await measure(ctx, f, n, false);
      if (f.deep) await measure(ctx, f, n, true);
    }
  },

  async run(ctx) {
    const s = state();
    const samples = samplesFor(ctx);
    const result: RunResult = { rows: s.rows, load_seconds: s.loadSeconds };
    for (const f of filters) {
      const first = await measure(ctx, f, samples, false);
      result[`${f.key}_first_p50`] = percentile(first, 50);
      result[`${f.key}_first_p99`] = percentile(first, 99);
      if (!f.deep) continue;
      const deep = await measure(ctx, f, samples, true);
      result[`${f.key}_deep_p50`] = percentile(deep, 50);
      result[`${f.key}_deep_p99`] = percentile(deep, 99);
    }
    const c = await load({
      url: `${ctx.base}/api/v1/merchants/${ctx.merchant.id}/payment-intents?limit=${pageSize}`,
      headers: { authorization: `Bearer ${ctx.merchant.key}` },
      connections: concurrentConnections,
      seconds: ctx.quick ? 2 : 5,
    });
    result.concurrent_rps = c.rps;
    result.concurrent_p99 = c.p99;
    return result;
  },
};
