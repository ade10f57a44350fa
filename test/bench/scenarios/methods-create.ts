import { load } from "../load.ts";
import type { BenchContext, Scenario } from "../types.ts";

const connections = 64;
const seconds = (ctx: BenchContext) => (ctx.quick ? 2 : 10);
const price = { price_amount: "100.00", price_currency: "USD" };
const one = JSON.stringify({ network: "bitcoin", asset: "BTC", ...price, merchant_reference: "bench-one-method" });
// Six methods on five networks: what a shop offering "all" of the usual coins asks for.
const six = JSON.stringify({
  ...price,
  merchant_reference: "bench-six-methods",
  payment_methods: [
    { network: "bitcoin", asset: "BTC" },
    { network: "ethereum", asset: "ETH" },
    { network: "ethereum", asset: "USDC" },
    { network: "base", asset: "USDC" },
    { network: "arbitrum", asset: "USDC" },
    { network: "polygon", asset: "USDC" },
  ],
});

function createLoad(ctx: BenchContext, body: string, c = connections) {
  return load({
    url: `${ctx.base}/api/v1/merchants/${ctx.merchant.id}/payment-intents`,
    method: "POST",
    headers: { authorization: `Bearer ${ctx.merchant.key}`, "content-type": "application/json" },
    body,
    connections: c,
    idempotencyKeys: true,
    seconds: seconds(ctx),
    cpu: { pid: ctx.servicePid, database: ctx.database },
  });
}

/**
 * A create offering six payment methods (issue 62) beside a one-method create, both priced in
 * USD: what the shopper's choice costs the merchant's create. Flat out (throughput, and CPU per
 * create in the service and PostgreSQL) and one at a time (the latency a lone create sees).
 */
export const methodsCreateScenario: Scenario = {
  name: "methods-create",
  title: `Create a 100.00 USD intent offering six payment methods (five networks) beside one offering one, REST, ${connections} connections and 1`,
  metrics: {
    one_rps: { label: "one-method creates/s", unit: "req/s" },
    six_rps: { label: "six-method creates/s", unit: "req/s" },
    cost: { label: "a six-method create's cost, flat out (one-method creates/s ÷ six-method creates/s)", unit: "×", target: { op: "<=", value: 1.5 }, checked: true },
    one_cpu_ms: { label: "CPU per one-method create (service and PostgreSQL)", unit: "ms" },
    six_cpu_ms: { label: "CPU per six-method create (service and PostgreSQL)", unit: "ms" },
    one_cpu_loop: { label: "of which the service's event loop, one method", unit: "ms" },
    six_cpu_loop: { label: "of which the service's event loop, six methods", unit: "ms" },
    one_cpu_threads: { label: "of which its other threads, one method", unit: "ms" },
    six_cpu_threads: { label: "of which its other threads, six methods", unit: "ms" },
    one_cpu_pg: { label: "of which PostgreSQL, one method", unit: "ms" },
    six_cpu_pg: { label: "of which PostgreSQL, six methods", unit: "ms" },
    one_p50_alone: { label: "one-method create p50, one at a time", unit: "ms" },
    six_p50_alone: { label: "six-method create p50, one at a time", unit: "ms" },
    latency_alone: { label: "a lone six-method create's latency ÷ a lone one-method create's (p50)", unit: "×", target: { op: "<=", value: 1.5 } },
  },
  async warmup(ctx) {
    await createLoad(ctx, one);
    await createLoad(ctx, six);
  },
  async run(ctx) {
    const o = process.env.SIX_ONLY ? await createLoad(ctx, six) : await createLoad(ctx, one);
    const s = await createLoad(ctx, six);
    const oAlone = await createLoad(ctx, one, 1);
    const sAlone = await createLoad(ctx, six, 1);
    // Everything but the load generator: the service's threads and PostgreSQL.
    const cpu = (r: typeof o) => (r.cpu ? r.cpu.eventLoop + r.cpu.otherThreads + r.cpu.postgres : Number.NaN);
    return {
      one_rps: o.rps,
      six_rps: s.rps,
      cost: o.rps / s.rps,
      one_cpu_ms: cpu(o),
      six_cpu_ms: cpu(s),
      one_cpu_loop: o.cpu?.eventLoop ?? Number.NaN,
      six_cpu_loop: s.cpu?.eventLoop ?? Number.NaN,
      one_cpu_threads: o.cpu?.otherThreads ?? Number.NaN,
      six_cpu_threads: s.cpu?.otherThreads ?? Number.NaN,
      one_cpu_pg: o.cpu?.postgres ?? Number.NaN,
      six_cpu_pg: s.cpu?.postgres ?? Number.NaN,
      one_p50_alone: oAlone.p50,
      six_p50_alone: sAlone.p50,
      latency_alone: sAlone.p50 / oAlone.p50,
    };
  },
};
