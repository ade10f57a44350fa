import { createApiKey, createMerchant } from "../../../services/auth/admin.ts";
import { scopes } from "../../../services/auth/keys.ts";
import { EventProducer } from "../events.ts";
import { createBenchEndpoint, startBenchReceiver, steadyEvents, type BenchReceiver } from "../receiver.ts";
import { percentile } from "../stats.ts";
import { Cleanup, startSystem, type System } from "../system.ts";
import type { Scenario } from "../types.ts";

/** The service's default attempt timeout: A's endpoints answer only after it. */
const timeoutMs = 10_000;
const endpointsOfA = 8;

const cleanup = new Cleanup();
let system: System;
let receiver: BenchReceiver;
let floods: EventProducer[] = [];
let b: EventProducer;

const createEndpoint = async (key: string, merchant: string, path: string) => (await createBenchEndpoint(system, path, { id: merchant, key })).id;

/**
 * Fair delivery (issue 36): merchant A's 8 endpoints answer only after the attempt timeout and
 * are flooded with deliveries; meanwhile merchant B records events at a steady rate. Measured:
 * from each of B's commits to its first request at B's receiver.
 */
export const fairnessScenario: Scenario = {
  name: "fairness",
  ownSystem: true,
  title: `Fair delivery: merchant B's first attempts while merchant A floods ${endpointsOfA} endpoints that hang past the attempt timeout (${timeoutMs / 1000} s, the default)`,
  metrics: {
    flood: { label: "A's deliveries queued to hanging endpoints", unit: "" },
    b_events: { label: "B's events (20/s)", unit: "" },
    b_p50: { label: "B's first attempt p50 (commit → request at B)", unit: "ms" },
    b_p99: { label: "B's first attempt p99", unit: "ms", target: { op: "<=", value: 1000 } },
    b_max: { label: "B's first attempt max", unit: "ms" },
    b_relay_p99: { label: "B's stage: commit → picked up by the relay, p99", unit: "ms" },
    b_dispatch_p99: { label: "B's stage: picked up → attempt started (published, pulled, claimed), p99", unit: "ms" },
  },
  async setup() {
    receiver = await startBenchReceiver(cleanup, 0, { prefix: "/a/", ms: timeoutMs + 1000 });
    system = await startSystem(cleanup, { ...receiver.env, WEBHOOK_TIMEOUT_MS: String(timeoutMs) });
    const a = system.merchant;
    const ids: string[] = [];
    for (let i = 1; i <= endpointsOfA; i++) ids.push(await createEndpoint(a.key, a.id, `/a/${i}`));
    floods = ids.map((id) => new EventProducer(system.databaseUrl, a.id, id));
    const em = system.db.em.fork();
    const merchantB = await createMerchant(em, "Bench Shop B");
    const keyB = await createApiKey(em, merchantB.id, "test", [...scopes]);
    b = new EventProducer(system.databaseUrl, merchantB.id, await createEndpoint(keyB.api_key, merchantB.id, "/b"));
    cleanup.teardown(async () => {
      for (const p of [...floods, b]) await p.close();
    });
  },
  async run(ctx) {
    await receiver.reset();
    // The flood first: it is ahead of every one of B's deliveries in the stream.
    const perEndpoint = ctx.quick ? 50 : 200;
    for (const p of floods) await p.record(perEndpoint);
    const { commits, latencies } = await steadyEvents(b, receiver, ctx.quick ? 3 : 15);
    // Where B's time went, from the service's own records: the relay, or the worker.
    const stages = await b.stages([...commits.keys()]);
    const timed = [...commits].filter(([id]) => stages.has(id));
    return {
      b_relay_p99: percentile(timed.map(([id, at]) => stages.get(id)!.pickedUp - at), 99),
      b_dispatch_p99: percentile(timed.map(([id]) => stages.get(id)!.started - stages.get(id)!.pickedUp), 99),
      flood: perEndpoint * endpointsOfA,
      b_events: commits.size,
      b_p50: percentile(latencies, 50),
      b_p99: percentile(latencies, 99),
      b_max: Math.max(...latencies),
    };
  },
  async teardown() {
    await cleanup.run();
  },
};
