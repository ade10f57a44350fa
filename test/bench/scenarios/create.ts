import { startBaselineInsert } from "../baseline.ts";
import { load } from "../load.ts";
import type { BenchContext, Scenario } from "../types.ts";

const connections = 64;
const body = JSON.stringify({ network: "ethereum", asset: "USDC", requested_amount: "12.50", merchant_reference: "bench-order" });

let baselineUrl = "";
let baselinePid = 0;
let getUrl = "";
let stopBaseline: (() => void) | undefined;

const seconds = (ctx: BenchContext) => (ctx.quick ? 3 : 10);

function createRequest(ctx: BenchContext) {
  return {
    url: `${ctx.base}/api/v1/merchants/${ctx.merchant.id}/payment-intents`,
    method: "POST" as const,
    headers: { authorization: `Bearer ${ctx.merchant.key}`, "content-type": "application/json" },
    body,
    connections,
    idempotencyKeys: true,
  };
}

/** Create intent through the REST gateway, against a raw node:http + pg insert in the same run. */
export const createScenario: Scenario = {
  name: "create",
  title: `Create intent through the REST gateway (${connections} connections, a new Idempotency-Key per request)`,
  metrics: {
    rps: { label: "requests/s", unit: "req/s" },
    p50: { label: "latency p50", unit: "ms" },
    p99: { label: "latency p99", unit: "ms", target: { op: "<=", value: 60 } },
    baseline_rps: { label: "baseline (node:http + pg insert) requests/s", unit: "req/s" },
    baseline_p99: { label: "baseline latency p99", unit: "ms" },
    ratio: { label: "ratio to baseline", unit: "×", target: { op: ">=", value: 0.45 } },
    get_rps: { label: "same path, GET one intent (key lookup + one select, no transaction): requests/s", unit: "req/s" },
    get_p99: { label: "same path, GET one intent: latency p99", unit: "ms" },
    get_ratio: { label: "GET one intent, ratio to baseline (the ceiling of the path)", unit: "×" },
    // Where the machine's CPU goes per request (cpu.ts; Linux). With every core busy, the ratio
    // of throughputs follows the ratio of these totals.
    cpu_total: { label: "CPU per create, everything that ran for it", unit: "ms" },
    cpu_event_loop: { label: "… the service's event loop", unit: "ms" },
    cpu_other_threads: { label: "… the service's other threads (address derivation, GC, libuv)", unit: "ms" },
    cpu_postgres: { label: "… PostgreSQL", unit: "ms" },
    cpu_load_generator: { label: "… the load generator", unit: "ms" },
    baseline_cpu_total: { label: "CPU per baseline insert, everything that ran for it", unit: "ms" },
  },
  async setup(ctx) {
    const baseline = await startBaselineInsert(ctx.databaseUrl, ctx.merchant.id);
    baselineUrl = baseline.url;
    baselinePid = baseline.pid;
    stopBaseline = baseline.stop;
    const created = await fetch(createRequest(ctx).url, {
      method: "POST",
      headers: { ...createRequest(ctx).headers, "idempotency-key": `bench-get-${Date.now()}` },
      body,
    });
    if (created.status !== 200) throw new Error(`create: ${created.status} ${await created.text()}`);
    getUrl = `${createRequest(ctx).url}/${((await created.json()) as { data: { public_id: string } }).data.public_id}`;
  },
  async warmup(ctx) {
    await load({ ...createRequest(ctx), seconds: 2 });
    await load({ url: baselineUrl, method: "POST", headers: { "content-type": "application/json" }, body, connections, seconds: 2 });
  },
  async run(ctx) {
    // How fast the same gateway → Connect → handler path goes with the least work a route can do.
    const get = await load({ url: getUrl, headers: { authorization: `Bearer ${ctx.merchant.key}` }, connections, seconds: seconds(ctx) });
    const api = await load({ ...createRequest(ctx), seconds: seconds(ctx), cpu: { pid: ctx.servicePid, database: ctx.database } });
    const raw = await load({
      url: baselineUrl,
      method: "POST",
      headers: { "content-type": "application/json" },
      body,
      connections,
      seconds: seconds(ctx),
      cpu: { pid: baselinePid, database: ctx.database },
    });
    return {
      rps: api.rps,
      p50: api.p50,
      p99: api.p99,
      baseline_rps: raw.rps,
      baseline_p99: raw.p99,
      ratio: api.rps / raw.rps,
      get_rps: get.rps,
      get_p99: get.p99,
      get_ratio: get.rps / raw.rps,
      cpu_total: api.cpu?.total ?? Number.NaN,
      cpu_event_loop: api.cpu?.eventLoop ?? Number.NaN,
      cpu_other_threads: api.cpu?.otherThreads ?? Number.NaN,
      cpu_postgres: api.cpu?.postgres ?? Number.NaN,
      cpu_load_generator: api.cpu?.loadGenerator ?? Number.NaN,
      baseline_cpu_total: raw.cpu?.total ?? Number.NaN,
    };
  },
  async teardown() {
    stopBaseline?.();
  },
};
