import { randomBytes } from "node:crypto";
import pg from "pg";
import { loadConfig } from "../../../services/platform/config.ts";
import { removePastRetention } from "../../../services/retention/job.ts";
import { dropMarginSeconds } from "../../../services/retention/partitions.ts";
import { partitionsFrom } from "../../helpers/partition-layout.ts";
import { SecretBox } from "../../../services/platform/secrets.ts";
import { load } from "../load.ts";
import { loadPastDays, writtenOut, type Loaded } from "../scale-load.ts";
import { startWebhookSystem, waitForArrivals, type WebhookSystem } from "../receiver.ts";
import { nowMs } from "../stats.ts";
import { Cleanup } from "../system.ts";
import type { BenchContext, RunResult, Scenario } from "../types.ts";

/**
 * The hot path at scale (issue 50): create, GET an event, the drain and the first page of the
 * deliveries list, measured on an empty database and again once the webhook tables hold 90 past
 * days of BENCH_SCALE_DELIVERIES deliveries (200k in --quick, 2M in full; 100000000 for the issue's
 * figure), with their events (one per BENCH_SCALE_ENDPOINTS deliveries, 2) and an attempt each
 * (BENCH_SCALE_ATTEMPTS=0: none); and the retention run that drops the oldest day (each run one
 * more). Each day is loaded in the database into its own partition, with ids of the shape the
 * service makes (they carry their day), to disabled endpoints of the same merchant: scale-load.ts.
 */

const day = 86_400_000;
const days = 90;
const connections = 32;
const endpointsFor = () => Number(process.env.BENCH_SCALE_ENDPOINTS ?? 2);
const deliveriesFor = (ctx: BenchContext) => Number(process.env.BENCH_SCALE_DELIVERIES ?? (ctx.quick ? 200_000 : 2_000_000));
const seconds = (ctx: BenchContext) => (ctx.quick ? 3 : 8);
const drainEvents = (ctx: BenchContext) => (ctx.quick ? 2_000 : 10_000);

const cleanup = new Cleanup();
let ws: WebhookSystem;
let empty: Phase;
let firstDay = 0;
let dropped = 0;
let loadSeconds = 0;
let loadedRows: Loaded;

interface Phase {
  create: number;
  get: number;
  drain: number;
  list: number;
}

/** Throughputs of the four, on the system as it is now. */
async function phase(ctx: BenchContext): Promise<Phase> {
  const { system, producer, receiver } = ws;
  const auth = { authorization: `Bearer ${system.merchant.key}` };
  const merchantPath = `${system.base}/api/v1/merchants/${system.merchant.id}`;
  const create = await load({
    url: `${merchantPath}/payment-intents`,
    method: "POST",
    headers: { ...auth, "content-type": "application/json" },
    body: JSON.stringify({ network: "ethereum", asset: "USDC", requested_amount: "12.50", merchant_reference: "bench-scale" }),
    connections,
    seconds: seconds(ctx),
    idempotencyKeys: true,
  });
  // The drain: events recorded at once, deliveries/s from the first commit to the last arrival.
  await receiver.reset();
  const t0 = nowMs();
  const ids: string[] = [];
  for (let left = drainEvents(ctx); left > 0; left -= 1000) ids.push(...(await producer.record(Math.min(1000, left))).ids);
  const arrivals = await waitForArrivals(receiver, ids, 300_000);
  const drain = ids.length / ((Math.max(...ids.map((id) => arrivals.get(id)![0]!)) - t0) / 1000);
  const get = await load({ url: `${merchantPath}/webhook-events/${ids[ids.length >> 1]}`, headers: auth, connections, seconds: seconds(ctx) });
  const list = await load({ url: `${merchantPath}/webhook-deliveries?limit=50`, headers: auth, connections, seconds: seconds(ctx) });
  return { create: create.rps, get: get.rps, drain, list: list.rps };
}

export const scaleScenario: Scenario = {
  name: "scale",
  title: "Create, GET, the drain and the list on an empty database and beside 90 days of deliveries; the retention run dropping a day",
  ownSystem: true,
  metrics: {
    deliveries: { label: "deliveries loaded over 90 past days (BENCH_SCALE_DELIVERIES), to BENCH_SCALE_ENDPOINTS endpoints an event (2)", unit: "rows" },
    events: { label: "their events", unit: "rows" },
    attempts: { label: "their attempts (none with BENCH_SCALE_ATTEMPTS=0)", unit: "rows" },
    load_seconds: { label: "loading them", unit: "s" },
    create_ratio: { label: "create: requests/s loaded ÷ empty", unit: "×" },
    get_ratio: { label: "GET one event: requests/s loaded ÷ empty", unit: "×" },
    drain_ratio: { label: "the drain: deliveries/s loaded ÷ empty", unit: "×" },
    list_ratio: { label: "GET webhook-deliveries, first page: requests/s loaded ÷ empty", unit: "×" },
    create_rps: { label: "create, loaded", unit: "req/s" },
    get_rps: { label: "GET one event, loaded", unit: "req/s" },
    drain_rate: { label: "the drain, loaded", unit: "deliveries/s" },
    list_rps: { label: "list, loaded", unit: "req/s" },
    pass_seconds: { label: "retention run dropping one day (events, deliveries and attempts)", unit: "s" },
    dropped_deliveries: { label: "deliveries it removed", unit: "rows" },
  },

  async setup(ctx) {
    ws = await startWebhookSystem(cleanup);
    // Once to warm the processes up (a cold one is slower, and would flatter the loaded figures), then measured.
    await phase(ctx);
    ctx.log("scale: the empty database");
    empty = await phase(ctx);
    ctx.log(`scale: empty: ${JSON.stringify(empty)}`);
    const client = new pg.Client({ connectionString: ws.system.databaseUrl });
    await client.connect();
    try {
      // The days are laid out anew (the empty phase's rows go with the legacy partition): loadPastDays
      // makes the 90 before today, today and the days up to the service's first are made empty.
      const today = Math.floor(Date.now() / day) * day;
      firstDay = today - days * day;
      await partitionsFrom(ws.system.db.em.fork(), (sql) => client.query(sql), firstDay, today);
      const merchant = ws.system.merchant.id;
      const box = SecretBox.fromMasterKeys(ws.system.masterKey);
      const endpoints: string[] = [];
      for (let k = 0; k < endpointsFor(); k++) {
        const endpoint = `we_bench_scale_${randomBytes(4).toString("hex")}`;
        await client.query(
          `insert into webhook_endpoints (id, merchant_id, environment, url, status, secret_ciphertext, created_at, disabled_at)
           values ($1, $2, 'test', $3, 'disabled', $4, now(), now())`,
          [endpoint, merchant, `https://bench.example.test/scale/${k}`, box.seal(endpoint, "whsec_" + randomBytes(24).toString("hex"))],
        );
        endpoints.push(endpoint);
      }
      const eventsPerDay = Math.floor(deliveriesFor(ctx) / days / endpoints.length);
      const withAttempts = process.env.BENCH_SCALE_ATTEMPTS !== "0";
      ctx.log(
        `scale: loading ${eventsPerDay * endpoints.length * days} deliveries (${endpoints.length} endpoints), ${eventsPerDay * days} events` +
          ` and ${withAttempts ? "an attempt each" : "no attempts"} over ${days} days`,
      );
      const t0 = performance.now();
      loadedRows = await loadPastDays(ws.system.databaseUrl, firstDay, days, { merchant, endpoints, eventsPerDay, attempts: withAttempts }, {
        workers: 2,
        minFreeBytes: Number(process.env.BENCH_SCALE_MIN_FREE_GB ?? 10) * 2 ** 30,
        log: ctx.log,
      });
      loadSeconds = (performance.now() - t0) / 1000;
      await client.query(`checkpoint`);
      ctx.log(`scale: loaded in ${loadSeconds.toFixed(0)} s; written out after ${(await writtenOut(600_000)).toFixed(0)} s more`);
    } finally {
      await client.end();
    }
  },

  async run(ctx): Promise<RunResult> {
    const loaded = await phase(ctx);
    ctx.log(`scale: loaded: ${JSON.stringify(loaded)}`);
    // The retention that puts the oldest day left just past it.
    const dayEnd = firstDay + (dropped + 1) * day;
    // (less the hour a day waits after it has passed: services/retention/partitions.ts dropMarginSeconds)
    const settings = { ...loadConfig({}).retention, eventSeconds: Math.floor((Date.now() - dayEnd) / 1000) - dropMarginSeconds - 60 };
    const t0 = performance.now();
    const pass = await removePastRetention(ws.system.db.em.fork(), settings, async () => undefined);
    const passSeconds = (performance.now() - t0) / 1000;
    dropped += 1;
    ctx.log(`scale: the retention run dropped a day of ${pass.webhook_deliveries} deliveries in ${passSeconds.toFixed(2)} s`);
    return {
      deliveries: loadedRows.deliveries,
      events: loadedRows.events,
      attempts: loadedRows.attempts,
      load_seconds: loadSeconds,
      create_ratio: loaded.create / empty.create,
      get_ratio: loaded.get / empty.get,
      drain_ratio: loaded.drain / empty.drain,
      list_ratio: loaded.list / empty.list,
      create_rps: loaded.create,
      get_rps: loaded.get,
      drain_rate: loaded.drain,
      list_rps: loaded.list,
      pass_seconds: passSeconds,
      dropped_deliveries: pass.webhook_deliveries,
    };
  },

  async teardown() {
    await cleanup.run();
  },
};
