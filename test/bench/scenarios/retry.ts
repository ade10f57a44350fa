import { setTimeout as sleep } from "node:timers/promises";
import type { EventProducer } from "../events.ts";
import { startWebhookSystem, type BenchReceiver } from "../receiver.ts";
import { percentile } from "../stats.ts";
import { Cleanup } from "../system.ts";
import type { Scenario } from "../types.ts";

const delaysMs = [1000, 2000];
const cleanup = new Cleanup();
let receiver: BenchReceiver;
let producer: EventProducer;

/**
 * Retry accuracy: a system of its own with a shortened schedule (1 s, 2 s; 3 attempts)
 * and a receiver that answers 503 to the first two requests of each event. The
 * spread is actual minus scheduled gap between consecutive attempts at the receiver.
 */
export const retryScenario: Scenario = {
  name: "retry",
  title: `Retry accuracy (WEBHOOK_RETRY_DELAYS=${delaysMs.map((d) => d / 1000).join(",")}, 503 twice, then 200)`,
  metrics: {
    deliveries: { label: "deliveries retried", unit: "" },
    early_max: { label: "earliest retry vs schedule (negative = early)", unit: "ms" },
    late_p50: { label: "lateness p50", unit: "ms" },
    late_p99: { label: "lateness p99", unit: "ms" },
    late_max: { label: "lateness max", unit: "ms", target: { op: "<=", value: 1000 } },
  },
  async setup() {
    ({ receiver, producer } = await startWebhookSystem(cleanup, {
      failFirst: 2,
      env: { WEBHOOK_RETRY_DELAYS: delaysMs.map((d) => d / 1000).join(","), WEBHOOK_MAX_ATTEMPTS: "3" },
    }));
  },
  async run(ctx) {
    await receiver.reset();
    const n = ctx.quick ? 50 : 300;
    const { ids } = await producer.record(n);
    const deadline = Date.now() + 60_000;
    let arrivals = await receiver.arrivals();
    while (!ids.every((id) => (arrivals.get(id)?.length ?? 0) >= 3)) {
      if (Date.now() > deadline) throw new Error("retries did not complete within 60 s");
      await sleep(200);
      arrivals = await receiver.arrivals();
    }
    const errors = ids.flatMap((id) => {
      const at = arrivals.get(id)!;
      return delaysMs.map((d, i) => at[i + 1]! - at[i]! - d);
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
