import { EventProducer } from "../events.ts";
import { createBenchEndpoint, startBenchReceiver, waitForArrivals, type BenchReceiver } from "../receiver.ts";
import { nowMs } from "../stats.ts";
import { Cleanup, startSystem, type System } from "../system.ts";
import type { BenchContext, Scenario } from "../types.ts";

/** As many worker processes as the delivery scenario's drain. */
const workers = 2;
/** Events recorded for the warm workers' endpoint before their drain is measured, so it is known fast. */
const warmupEvents = 500;

const cleanup = new Cleanup();
let system: System;
let receiver: BenchReceiver;
let endpoints = 0;

/** An endpoint no worker has met, and a producer of its deliveries. */
async function newEndpoint(): Promise<EventProducer> {
  const { id } = await createBenchEndpoint(system, `/drain/${++endpoints}`);
  const producer = new EventProducer(system.databaseUrl, system.merchant.id, id);
  cleanup.teardown(() => producer.close());
  return producer;
}

/** Records `n` events to the producer's endpoint, 1000 per transaction; their ids. */
async function record(producer: EventProducer, n: number): Promise<string[]> {
  const ids: string[] = [];
  while (ids.length < n) ids.push(...(await producer.record(Math.min(1000, n - ids.length))).ids);
  return ids;
}

async function lastArrival(ids: readonly string[], timeoutMs: number): Promise<number> {
  const arrivals = await waitForArrivals(receiver, ids, timeoutMs);
  return Math.max(...ids.map((id) => arrivals.get(id)![0]!));
}

async function startWorkers() {
  return Promise.all(Array.from({ length: workers }, () => system.spawn(["worker"])));
}

/** Warm: workers that have delivered to the endpoint before; deliveries/s from the first commit to the last arrival. */
async function warm(ctx: BenchContext, n: number): Promise<number> {
  const running = await startWorkers();
  try {
    const producer = await newEndpoint();
    await lastArrival(await record(producer, warmupEvents), 120_000);
    await receiver.reset();
    const t0 = nowMs();
    const ids = await record(producer, n);
    const rate = n / ((await lastArrival(ids, 300_000)) - t0) * 1000;
    ctx.log(`cold-drain: warm drain of ${n} at ${Math.round(rate)}/s`);
    return rate;
  } finally {
    await Promise.all(running.map((w) => w.kill("SIGTERM")));
  }
}

/**
 * Cold: a backlog waits in the outbox for an endpoint no worker has met (no worker ran while it
 * was recorded, as after a worker outage), then freshly started workers drain it; deliveries/s
 * from the moment both have started to the last arrival.
 */
async function cold(ctx: BenchContext, n: number): Promise<number> {
  const producer = await newEndpoint();
  const ids = await record(producer, n);
  await receiver.reset();
  const running = await startWorkers();
  const t0 = nowMs();
  try {
    const rate = n / ((await lastArrival(ids, 300_000)) - t0) * 1000;
    ctx.log(`cold-drain: cold drain of ${n} at ${Math.round(rate)}/s`);
    return rate;
  } finally {
    await Promise.all(running.map((w) => w.kill("SIGTERM")));
  }
}

/**
 * The drain a merchant waits on after an endpoint or worker outage (issue 48): a backlog to one
 * fast endpoint drained by workers that know it (warm) and by freshly started ones that do not
 * (cold). The cold drain is checked: below 0.9 × the warm one fails the bench.
 */
export const coldDrainScenario: Scenario = {
  name: "cold-drain",
  ownSystem: true,
  title: `A backlog to one fast endpoint drained by ${workers} worker processes: warm, and freshly started on a backlog to a new endpoint`,
  metrics: {
    events: { label: "deliveries in each drain", unit: "" },
    warm_per_s: { label: "warm drain: deliveries/s (workers that know the endpoint)", unit: "/s" },
    cold_per_s: { label: "cold drain: deliveries/s (fresh workers, a new endpoint, the backlog waiting)", unit: "/s" },
    cold_ratio: { label: "cold drain ÷ warm drain", unit: "×", target: { op: ">=", value: 0.9 }, checked: true },
  },
  async setup(ctx) {
    receiver = await startBenchReceiver(cleanup);
    // No worker in the main process: the scenario starts and stops its own.
    system = await startSystem(cleanup, receiver.env, ["rpc", "gateway", "scheduler"]);
    ctx.log(`cold-drain: receiver on ${receiver.port}`);
  },
  async run(ctx) {
    const n = ctx.quick ? 5000 : 10_000;
    const warmRate = await warm(ctx, n);
    const coldRate = await cold(ctx, n);
    return { events: n, warm_per_s: warmRate, cold_per_s: coldRate, cold_ratio: coldRate / warmRate };
  },
  async teardown() {
    await cleanup.run();
  },
};
