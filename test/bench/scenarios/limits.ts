import { freePort, spawnService, type ServiceProcess } from "../../helpers/processes.ts";
import { load, type LoadResult } from "../load.ts";
import { Cleanup } from "../system.ts";
import type { BenchContext, Scenario } from "../types.ts";

const connections = 64;
const body = JSON.stringify({ network: "ethereum", asset: "USDC", requested_amount: "12.50", merchant_reference: "bench-limits" });

const cleanup = new Cleanup();
const started: { shared?: Started; local?: Started } = {};
interface Started {
  process: ServiceProcess;
  base: string;
}

/** The rpc and gateway roles alone (no worker or scheduler taking CPU beside them), on the main system's database. */
async function start(ctx: BenchContext, store: "postgres" | "local"): Promise<Started> {
  const port = await freePort();
  const p = spawnService(cleanup, ["rpc", "gateway"], { ...ctx.env, RATE_LIMIT_STORE: store, PORT: String(port), RPC_PORT: "0", OPS_PORT: "0" });
  cleanup.teardown(() => p.kill("SIGTERM"));
  await p.started;
  return { process: p, base: `http://127.0.0.1:${port}` };
}

function creates(ctx: BenchContext, s: Started, seconds: number): Promise<LoadResult> {
  return load({
    url: `${s.base}/api/v1/merchants/${ctx.merchant.id}/payment-intents`,
    method: "POST",
    headers: { authorization: `Bearer ${ctx.merchant.key}`, "content-type": "application/json" },
    body,
    connections,
    seconds,
    idempotencyKeys: true,
    cpu: { pid: s.process.child.pid as number, database: ctx.database },
  });
}

/**
 * What the shared rate limits cost a create: the same creates through two processes alike but for
 * where their buckets are, one taking each call's token from PostgreSQL (rate_limit_buckets, the
 * default) and one counting in memory (RATE_LIMIT_STORE=local), one after the other.
 */
export const limitsScenario: Scenario = {
  name: "limits",
  // Its own processes: the main one's profile would say nothing about them.
  ownSystem: true,
  title: `What the shared rate limits cost a create (REST, ${connections} connections): PostgreSQL buckets against in-memory ones`,
  metrics: {
    shared_rps: { label: "creates/s, buckets in PostgreSQL (the default)", unit: "req/s" },
    local_rps: { label: "creates/s, buckets in memory (RATE_LIMIT_STORE=local)", unit: "req/s" },
    ratio: { label: "shared / in memory, creates/s", unit: "×" },
    shared_p50: { label: "latency p50, shared", unit: "ms" },
    local_p50: { label: "latency p50, in memory", unit: "ms" },
    shared_p99: { label: "latency p99, shared", unit: "ms" },
    local_p99: { label: "latency p99, in memory", unit: "ms" },
    cpu_added: { label: "CPU per create added by the shared take (service + PostgreSQL)", unit: "ms" },
    cpu_added_postgres: { label: "… of it in PostgreSQL", unit: "ms" },
    shared_cpu_total: { label: "CPU per create, shared (everything that ran for it)", unit: "ms" },
  },
  async setup(ctx) {
    started.shared = await start(ctx, "postgres");
    started.local = await start(ctx, "local");
  },
  async warmup(ctx) {
    await creates(ctx, started.shared!, 2);
    await creates(ctx, started.local!, 2);
  },
  async run(ctx) {
    const seconds = ctx.quick ? 3 : 10;
    const shared = await creates(ctx, started.shared!, seconds);
    const local = await creates(ctx, started.local!, seconds);
    return {
      shared_rps: shared.rps,
      local_rps: local.rps,
      ratio: shared.rps / local.rps,
      shared_p50: shared.p50,
      local_p50: local.p50,
      shared_p99: shared.p99,
      local_p99: local.p99,
      cpu_added: shared.cpu && local.cpu ? shared.cpu.total - shared.cpu.loadGenerator - (local.cpu.total - local.cpu.loadGenerator) : Number.NaN,
      cpu_added_postgres: shared.cpu && local.cpu ? shared.cpu.postgres - local.cpu.postgres : Number.NaN,
      shared_cpu_total: shared.cpu?.total ?? Number.NaN,
    };
  },
  async teardown() {
    await cleanup.run();
  },
};
