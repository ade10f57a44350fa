import { setTimeout as sleep } from "node:timers/promises";
import type { EventProducer } from "../events.ts";
import { startWebhookSystem, type BenchReceiver } from "../receiver.ts";
import { percentile } from "../stats.ts";
import { Cleanup } from "../system.ts";
import type { Scenario } from "../types.ts";

interface RetryVariant {
  name: string;
  /** WEBHOOK_RETRY_DELAYS, ms. */
  delaysMs: number[];
  /** The receiver answers 503 to this many requests of each event, then 200. */
  failFirst: number;
  /** The delays measured: the measured events' first retries. */
  measured: number[];
  /** Events recorded first and left waiting on the last (long) delay while the measured ones retry. */
  parked: (quick: boolean) => number;
  /** More settings: WEBHOOK_STREAM_WAIT_SECONDS below the delays, so that every retry waits in the outbox. */
  env?: Record<string, string>;
}

async function untilArrivals(receiver: BenchReceiver, ids: readonly string[], count: number, timeoutMs: number) {
  const deadline = Date.now() + timeoutMs;
  let arrivals = await receiver.arrivals();
  while (!ids.every((id) => (arrivals.get(id)?.length ?? 0) >= count)) {
    if (Date.now() > deadline) throw new Error(`retries did not complete within ${timeoutMs / 1000} s`);
    await sleep(200);
    arrivals = await receiver.arrivals();
  }
  return arrivals;
}

/**
 * Retry accuracy: a system of its own with a shortened schedule and a receiver that answers
 * 503 to the first requests of each event. The spread is actual minus scheduled gap between
 * consecutive attempts at the receiver. The mixed variant first parks events on a long last
 * delay, so the measured retries run while the consumer's redelivery timer could be armed for
 * the long one (nats-server #6085).
 */
function retryScenario(v: RetryVariant): Scenario {
  const cleanup = new Cleanup();
  let receiver: BenchReceiver;
  let producer: EventProducer;
  const { measured } = v;
  const delays = v.delaysMs.map((d) => d / 1000).join(",");
  return {
    name: v.name,
    ownSystem: true,
    title:
      v.parked(false) > 0
        ? `Retry accuracy with mixed backoffs (WEBHOOK_RETRY_DELAYS=${delays}; events parked on the ${v.delaysMs.at(-1)! / 1000} s delay while others retry)`
        : v.env?.WEBHOOK_STREAM_WAIT_SECONDS
          ? `Retry accuracy through the outbox (WEBHOOK_RETRY_DELAYS=${delays}, WEBHOOK_STREAM_WAIT_SECONDS=${v.env.WEBHOOK_STREAM_WAIT_SECONDS}: every retry waits out of JetStream, published when due)`
          : `Retry accuracy (WEBHOOK_RETRY_DELAYS=${delays}, 503 ${v.failFirst} times, then 200)`,
    metrics: {
      deliveries: { label: "deliveries retried", unit: "" },
      early_max: { label: "earliest retry vs schedule (negative = early)", unit: "ms" },
      late_p50: { label: "lateness p50", unit: "ms" },
      late_p99: { label: "lateness p99", unit: "ms" },
      late_max: { label: "lateness max", unit: "ms", target: { op: "<=", value: 1000 } },
    },
    async setup() {
      ({ receiver, producer } = await startWebhookSystem(cleanup, {
        failFirst: v.failFirst,
        env: { WEBHOOK_RETRY_DELAYS: delays, WEBHOOK_MAX_ATTEMPTS: String(v.delaysMs.length + 1), ...v.env },
      }));
    },
    async run(ctx) {
      await receiver.reset();
      const parked = v.parked(ctx.quick);
      if (parked > 0) {
        // Through every short delay: they now wait on the long one.
        const { ids } = await producer.record(parked);
        await untilArrivals(receiver, ids, v.delaysMs.length, 60_000);
      }
      const n = ctx.quick ? 50 : 300;
      const { ids } = await producer.record(n);
      const arrivals = await untilArrivals(receiver, ids, measured.length + 1, 60_000);
      const errors = ids.flatMap((id) => {
        const at = arrivals.get(id)!;
        return measured.map((d, i) => at[i + 1]! - at[i]! - d);
      });
      return {
        deliveries: n,
        early_max: Math.min(...errors),
        late_p50: percentile(errors, 50),
        late_p99: percentile(errors, 99),
        late_max: Math.max(...errors),
      };
    },
    async teardown() {
      await cleanup.run();
    },
  };
}

export const retryScenarios: Scenario[] = [
  retryScenario({ name: "retry", delaysMs: [1000, 2000], failFirst: 2, measured: [1000, 2000], parked: () => 0 }),
  retryScenario({ name: "retry-mixed", delaysMs: [1000, 2000, 120_000], failFirst: 3, measured: [1000, 2000], parked: (quick) => (quick ? 10 : 50) }),
  retryScenario({ name: "retry-outbox", delaysMs: [3000, 4000], failFirst: 2, measured: [3000, 4000], parked: () => 0, env: { WEBHOOK_STREAM_WAIT_SECONDS: "1" } }),
];
