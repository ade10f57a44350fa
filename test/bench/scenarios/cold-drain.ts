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

interface Arrivals {
  /** When the first and the last delivery arrived. */
  first: number;
  last: number;
  /** The longest time between two deliveries' arrivals. */
  pauseMs: number;
}

async function drained(ids: readonly string[], timeoutMs: number): Promise<Arrivals> {
  const arrivals = await waitForArrivals(receiver, ids, timeoutMs);
  const times = ids.map((id) => arrivals.get(id)![0]!).sort((a, b) => a - b);
  let pauseMs = 0;
  for (let i = 1; i < times.length; i++) pauseMs = Math.max(pauseMs, times[i]! - times[i - 1]!);
  return { first: times[0]!, last: times[times.length - 1]!, pauseMs };
}

interface Drain {
  rate: number;
  firstMs: number;
  pauseMs: number;
}

/** A drain from `t0`: deliveries/s to the last arrival, the wait for the first, and the longest pause after it. */
function drain(ctx: BenchContext, kind: string, n: number, t0: number, d: Arrivals): Drain {
  const rate = (n / (d.last - t0)) * 1000;
  const firstMs = d.first - t0;
  ctx.log(`cold-drain: ${kind} drain of ${n} at ${Math.round(rate)}/s; the first arrived after ${Math.round(firstMs)} ms, then none for ${Math.round(d.pauseMs)} ms at most`);
  return { rate, firstMs, pauseMs: d.pauseMs };
}

/** The workers, started at once, and when the first of them said it had started. */
async function startWorkers() {
  const started: number[] = [];
  const running = await Promise.all(Array.from({ length: workers }, () => system.spawn(["worker"]).then((w) => (started.push(nowMs()), w))));
  return { running, firstStarted: Math.min(...started) };
}

/** Warm: workers that have delivered to the endpoint before; deliveries/s from the first commit to the last arrival. */
async function warm(ctx: BenchContext, n: number): Promise<Drain> {
  const { running } = await startWorkers();
  try {
    const producer = await newEndpoint();
    await waitForArrivals(receiver, await record(producer, warmupEvents), 120_000);
    await receiver.reset();
    const t0 = nowMs();
    const ids = await record(producer, n);
    return drain(ctx, "warm", n, t0, await drained(ids, 300_000));
  } finally {
    await Promise.all(running.map((w) => w.kill("SIGTERM")));
  }
}

/**
 * Cold: a backlog waits in the outbox for an endpoint no worker has met (no worker ran while it
 * was recorded, as after a worker outage), then freshly started workers drain it; deliveries/s
 * from the moment the first of them has started (or its first delivery, if sooner) to the last arrival.
 */
async function cold(ctx: BenchContext, n: number): Promise<Drain> {
  const producer = await newEndpoint();
  const ids = await record(producer, n);
  await receiver.reset();
  const { running, firstStarted } = await startWorkers();
  try {
    // From the first worker's start: a worker delivers from its first pull, before it says it has
    // started (so from the first delivery, if that came sooner), while the other may still start.
    const arrivals = await drained(ids, 300_000);
    return drain(ctx, "cold", n, Math.min(firstStarted, arrivals.first), arrivals);
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
    warm_first_ms: { label: "warm drain: the first delivery's arrival, from the first commit", unit: "ms" },
    cold_first_ms: { label: "cold drain: the first delivery's arrival, from the first worker's start (0: it delivered before it said it had started)", unit: "ms" },
    warm_pause_ms: { label: "warm drain: the longest time between two arrivals", unit: "ms" },
    cold_pause_ms: { label: "cold drain: the longest time between two arrivals (messages sent back to JetStream show here)", unit: "ms" },
  },
  async setup(ctx) {
    receiver = await startBenchReceiver(cleanup);
    // No worker in the main process: the scenario starts and stops its own.
    system = await startSystem(cleanup, receiver.env, ["rpc", "gateway", "scheduler"]);
    ctx.log(`cold-drain: receiver on ${receiver.port}`);
  },
  async run(ctx) {
    const n = ctx.quick ? 5000 : 10_000;
    const w = await warm(ctx, n);
    const c = await cold(ctx, n);
    return { events: n, warm_per_s: w.rate, cold_per_s: c.rate, cold_ratio: c.rate / w.rate, warm_first_ms: w.firstMs, cold_first_ms: c.firstMs, warm_pause_ms: w.pauseMs, cold_pause_ms: c.pauseMs };
  },
  async teardown() {
    await cleanup.run();
  },
};
