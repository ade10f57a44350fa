import { load } from "../load.ts";
import type { BenchContext, Scenario } from "../types.ts";

const connections = 64;
const body = JSON.stringify({ network: "ethereum", asset: "USDC", requested_amount: "12.50", merchant_reference: "bench-replay" });

function replayRequest(ctx: BenchContext) {
  return {
    url: `${ctx.base}/api/v1/merchants/${ctx.merchant.id}/payment-intents`,
    method: "POST" as const,
    headers: { authorization: `Bearer ${ctx.merchant.key}`, "content-type": "application/json", "idempotency-key": "bench-replay-key-1" },
    body,
    connections,
  };
}

/** The same create request under one Idempotency-Key: every request after the first is a replay. */
export const replayScenario: Scenario = {
  name: "replay",
  title: `Idempotent replay of one key (${connections} connections)`,
  metrics: {
    rps: { label: "requests/s", unit: "req/s" },
    p50: { label: "latency p50", unit: "ms" },
    p99: { label: "latency p99", unit: "ms" },
  },
  async warmup(ctx) {
    await load({ ...replayRequest(ctx), seconds: 2 });
  },
  async run(ctx) {
    const r = await load({ ...replayRequest(ctx), seconds: ctx.quick ? 3 : 10 });
    return { rps: r.rps, p50: r.p50, p99: r.p99 };
  },
};
