import { createClient, type Client } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { IntentService } from "../../../gen/payments/v1/payment_intents_pb.ts";
import { percentile } from "../stats.ts";
import type { BenchContext, Scenario } from "../types.ts";

const concurrency = 64;

let client: Client<typeof IntentService> | undefined;

/**
 * Closed-loop load over gRPC: `concurrency` calls in flight on one HTTP/2 connection (as the
 * Connect client multiplexes them), each with a new Idempotency-Key; throws on any failure.
 */
async function grpcLoad(ctx: BenchContext, seconds: number): Promise<{ rps: number; p50: number; p99: number }> {
  client ??= createClient(IntentService, createGrpcTransport({ baseUrl: ctx.rpcUrl }));
  const run = `${process.pid}-${Date.now()}`;
  let n = 0;
  const latencies: number[] = [];
  const started = performance.now();
  const end = started + seconds * 1000;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        const t0 = performance.now();
        await client!.createPaymentIntent(
          { merchant: ctx.merchant.id, network: "ethereum", asset: "USDC", requestedAmount: "12.50", merchantReference: "bench-grpc" },
          { headers: { authorization: `Bearer ${ctx.merchant.key}`, "idempotency-key": `bench-grpc-${run}-${n++}` } },
        );
        latencies.push(performance.now() - t0);
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  return { rps: latencies.length / elapsed, p50: percentile(latencies, 50), p99: percentile(latencies, 99) };
}

/** Create intent over gRPC straight to the rpc port: what an internal caller pays, without the REST gateway. */
export const grpcCreateScenario: Scenario = {
  name: "grpc-create",
  title: `Create intent over gRPC to the rpc port (h2c, Connect client, ${concurrency} calls in flight, a new Idempotency-Key per call)`,
  metrics: {
    rps: { label: "calls/s", unit: "calls/s" },
    p50: { label: "latency p50", unit: "ms" },
    p99: { label: "latency p99", unit: "ms" },
  },
  async warmup(ctx) {
    await grpcLoad(ctx, 2);
  },
  async run(ctx) {
    return grpcLoad(ctx, ctx.quick ? 3 : 10);
  },
};
