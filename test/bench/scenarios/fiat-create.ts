import { load } from "../load.ts";
import type { BenchContext, Scenario } from "../types.ts";

const connections = 64;
const seconds = (ctx: BenchContext) => (ctx.quick ? 2 : 10);
const crypto = JSON.stringify({ network: "bitcoin", asset: "BTC", requested_amount: "0.002", merchant_reference: "bench-crypto" });
const fiat = JSON.stringify({ network: "bitcoin", asset: "BTC", price_amount: "100.00", price_currency: "USD", merchant_reference: "bench-fiat" });

function createLoad(ctx: BenchContext, body: string) {
  return load({
    url: `${ctx.base}/api/v1/merchants/${ctx.merchant.id}/payment-intents`,
    method: "POST",
    headers: { authorization: `Bearer ${ctx.merchant.key}`, "content-type": "application/json" },
    body,
    connections,
    idempotencyKeys: true,
    seconds: seconds(ctx),
  });
}

/**
 * Create of a fiat-priced intent next to a crypto-priced one, on the same asset: the quote comes
 * from rates read in the background, so it should cost about nothing, and no request to an
 * exchange (the system's local exchanges count what they answer; they are refreshed hourly).
 */
export const fiatCreateScenario: Scenario = {
  name: "fiat-create",
  title: `Create a fiat-priced intent (100.00 USD in BTC) beside a crypto-priced one (0.002 BTC), REST, ${connections} connections`,
  metrics: {
    crypto_rps: { label: "crypto-priced creates/s", unit: "req/s" },
    crypto_p99: { label: "crypto-priced latency p99", unit: "ms" },
    fiat_rps: { label: "fiat-priced creates/s", unit: "req/s" },
    fiat_p99: { label: "fiat-priced latency p99", unit: "ms" },
    ratio: { label: "fiat-priced to crypto-priced throughput", unit: "×", target: { op: ">=", value: 0.9 } },
    exchange_requests: { label: "requests to an exchange during the fiat-priced run", unit: "requests", target: { op: "<=", value: 0 }, checked: true },
  },
  async warmup(ctx) {
    await createLoad(ctx, crypto);
    await createLoad(ctx, fiat);
  },
  async run(ctx) {
    const c = await createLoad(ctx, crypto);
    const before = ctx.exchangeRequests();
    const f = await createLoad(ctx, fiat);
    const exchange = ctx.exchangeRequests() - before;
    return { crypto_rps: c.rps, crypto_p99: c.p99, fiat_rps: f.rps, fiat_p99: f.p99, ratio: f.rps / c.rps, exchange_requests: exchange };
  },
};
