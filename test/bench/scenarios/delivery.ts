import { fork, type ChildProcess } from "node:child_process";
import https from "node:https";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { signPayload } from "../../../services/delivery/signature.ts";
import { backendsOf, meterGroups, processesNamed } from "../cpu.ts";
import type { EventProducer } from "../events.ts";
import { benchHost, startWebhookSystem, waitForArrivals, type BenchReceiver } from "../receiver.ts";
import { nowMs, percentile } from "../stats.ts";
import { Cleanup, type System } from "../system.ts";
import type { BenchContext, Scenario } from "../types.ts";

const cleanup = new Cleanup();
/** Worker processes besides the all-roles one (BENCH_EXTRA_WORKERS): one per core is the way to scale delivery. */
const extraWorkers = Number(process.env.BENCH_EXTRA_WORKERS ?? 1);
let system: System;
let receiver: BenchReceiver;
let secret = "";
let producer: EventProducer;

/** Who spends the CPU of a delivery: every process it passes through, on this machine. */
const pipelineGroups = () => ({
  service: () => system.processes.map((p) => p.child.pid as number),
  postgres: () => backendsOf(system.database, (port) => !producer.ports.has(port)),
  postgres_producer: () => backendsOf(system.database, (port) => producer.ports.has(port)),
  nats: () => processesNamed("nats-server"),
  receiver: () => [receiver.pid],
  producer: () => [process.pid],
});
type PipelineCpu = Record<keyof ReturnType<typeof pipelineGroups>, number>;

/**
 * N events recorded at once (1000 per transaction), their deliveries into `table`: deliveries/s from
 * the first commit to the last arrival, and the CPU per delivery of each group.
 */
async function drain<K extends string>(
  ctx: BenchContext,
  n: number,
  groups: Record<K, () => readonly (number | string)[]>,
  table?: string,
): Promise<{ rate: number; cpu: Record<K, number> | undefined }> {
  await receiver.reset();
  const ids: string[] = [];
  const meter = meterGroups(groups);
  const t0 = nowMs();
  let next = 0;
  while (next < n) {
    const count = Math.min(1000, n - next);
    next += count;
    ids.push(...(await producer.record(count, table)).ids);
  }
  const arrivals = await waitForArrivals(receiver, ids, 120_000);
  const cpu = meter.stop(n);
  const last = Math.max(...ids.map((id) => arrivals.get(id)![0]!));
  ctx.log(`delivery: ${n} events recorded in ${Math.round(nowMs() - t0)} ms${table ? ` (into ${table})` : ""}`);
  return { rate: n / ((last - t0) / 1000), cpu };
}

/** The service's drain: the CPU per delivery of every process it passes through. */
const sustained = (ctx: BenchContext, n: number): Promise<{ rate: number; cpu: PipelineCpu | undefined }> => drain(ctx, n, pipelineGroups());

/**
 * The durable raw worker's table: webhook_deliveries' columns, defaults and six indexes (`like …
 * including all`; no trigger and no foreign keys), so its rows are the service's rows, written as
 * the producer writes the service's, but out of the relay's sight.
 */
const durableRawTable = "bench_raw_deliveries";
/** As many processes as the service's drain (the all-roles one and the extra workers). */
const durableRawProcesses = 1 + extraWorkers;

let durableRawWorkers: ChildProcess[] = [];

/** Starts the durable raw worker's processes (durable-raw-worker.ts), idle until a drain of theirs. */
async function startDurableRaw(): Promise<void> {
  for (let i = 0; i < durableRawProcesses; i++) {
    const child = fork(path.join(import.meta.dirname, "../durable-raw-worker.ts"), [], {
      env: {
        ...process.env,
        DATABASE_URL: system.databaseUrl,
        RAW_TABLE: durableRawTable,
        RECEIVER_PORT: String(receiver.port),
        RECEIVER_HOST: benchHost,
        CA_FILE: receiver.ca.caFile,
        SIGNING_SECRET: secret,
      },
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    cleanup.teardown(() => child.kill("SIGKILL"));
    durableRawWorkers.push(child);
    await new Promise<void>((resolve, reject) => {
      child.once("message", () => resolve());
      child.once("exit", (code) => reject(new Error(`durable raw worker exited (${code})`)));
    });
  }
}

/**
 * The drain's baseline: the same N events drained by the durable raw worker's processes, running
 * from before the first commit until the last arrival; and the CPU per delivery of its processes,
 * PostgreSQL's backends (the workers' and the producer's), the receiver and the producer.
 */
async function durableRaw(ctx: BenchContext, n: number) {
  for (const w of durableRawWorkers) w.send({ run: true });
  try {
    return await drain(
      ctx,
      n,
      {
        workers: () => durableRawWorkers.map((w) => w.pid as number),
        postgres: () => backendsOf(system.database, (port) => !producer.ports.has(port)),
        postgres_producer: () => backendsOf(system.database, (port) => producer.ports.has(port)),
        receiver: () => [receiver.pid],
        producer: () => [process.pid],
      },
      durableRawTable,
    );
  } finally {
    await Promise.all(
      durableRawWorkers.map(
        (w) =>
          new Promise<void>((resolve) => {
            // Paused after the batch in hand; or gone (the run then fails by its missing arrivals).
            if (w.exitCode !== null || !w.connected) return resolve();
            w.once("message", () => resolve());
            w.once("exit", () => resolve());
            w.send({ run: false });
          }),
      ),
    );
  }
}

interface Latency {
  p50: number;
  p99: number;
  achieved: number;
  /** Per stage, p50 and p99 (ms): commit → picked up by the relay → attempt started → request at the receiver. */
  stages: Record<"relay" | "dispatch" | "send", { p50: number; p99: number }>;
}

/** A fixed offered rate (rate/100 events every 10 ms, each batch its own transaction): commit → first attempt, by stage. */
async function latencyAt(rate: number, seconds: number): Promise<Latency> {
  await receiver.reset();
  const commits = new Map<string, number>();
  const perTick = rate / 100;
  const t0 = nowMs();
  const pending: Promise<void>[] = [];
  for (let tick = 0; tick < seconds * 100; tick++) {
    const due = t0 + tick * 10;
    const wait = due - nowMs();
    if (wait > 0) await sleep(wait);
    pending.push(
      producer.record(perTick).then(({ ids, committedAt }) => {
        for (const id of ids) commits.set(id, committedAt);
      }),
    );
  }
  await Promise.all(pending);
  const achieved = commits.size / ((nowMs() - t0) / 1000);
  const arrivals = await waitForArrivals(receiver, [...commits.keys()], 120_000);
  const latencies = [...commits].map(([id, at]) => arrivals.get(id)![0]! - at);
  const stages = await producer.stages([...commits.keys()]);
  const stage = (f: (id: string, at: number) => number) => {
    const values = [...commits].filter(([id]) => stages.has(id)).map(([id, at]) => f(id, at));
    return { p50: percentile(values, 50), p99: percentile(values, 99) };
  };
  return {
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    achieved,
    stages: {
      relay: stage((id, at) => stages.get(id)!.pickedUp - at),
      dispatch: stage((id) => stages.get(id)!.started - stages.get(id)!.pickedUp),
      send: stage((id) => arrivals.get(id)![0]! - stages.get(id)!.started),
    },
  };
}

/**
 * The second reference (no target): a raw loop POSTing signed bodies to the same receiver (64 at a
 * time, keep-alive), with no durable work at all, and its CPU per request.
 */
async function rawLoop(seconds: number): Promise<{ rate: number; cpu: { client: number; receiver: number } | undefined }> {
  const agent = new https.Agent({ keepAlive: true, maxSockets: 64, ca: receiver.ca.caPem });
  const body = Buffer.from(JSON.stringify({ id: "evt_raw", type: "webhook.test", created_at: new Date().toISOString(), data: { test: { synthetic: true } } }));
  let sent = 0;
  const end = nowMs() + seconds * 1000;
  const post = () =>
    new Promise<void>((resolve, reject) => {
      const ts = Math.floor(Date.now() / 1000);
      const req = https.request(
        {
          host: "127.0.0.1",
          port: receiver.port,
          servername: benchHost,
          path: "/raw",
          method: "POST",
          agent,
          headers: {
            host: benchHost,
            "content-type": "application/json",
            "x-service-event-id": `raw-${sent}`,
            "x-service-timestamp": String(ts),
            "x-service-signature": signPayload(secret, ts, body),
          },
        },
        (res) => {
          res.resume();
          res.on("end", () => (res.statusCode === 200 ? resolve() : reject(new Error(`HTTP ${res.statusCode}`))));
        },
      );
      req.on("error", reject);
      req.end(body);
    });
  const meter = meterGroups({ client: () => [process.pid], receiver: () => [receiver.pid] });
  const t0 = nowMs();
  await Promise.all(
    Array.from({ length: 64 }, async () => {
      while (nowMs() < end) {
        await post();
        sent++;
      }
    }),
  );
  const rate = sent / ((nowMs() - t0) / 1000);
  const cpu = meter.stop(sent);
  agent.destroy();
  await receiver.reset();
  return { rate, cpu };
}

const stageLabels = {
  relay: "commit → picked up (the relay woken, its take begun)",
  dispatch: "picked up → attempt started (mark committed, published, pulled, claimed)",
  send: "attempt started → request at the receiver (connection, TLS, request)",
} as const;
/** The 300/s run's stages, so the next regression shows where it is. */
const stageMetrics = Object.fromEntries(
  Object.entries(stageLabels).flatMap(([stage, label]) => [
    [`stage_${stage}_p50`, { label: `300/s stage: ${label} p50`, unit: "ms" }],
    [`stage_${stage}_p99`, { label: `300/s stage: ${label} p99`, unit: "ms" }],
  ]),
);

const cpuLabels = {
  service: "the service's processes (relay, workers: publish, pull, claim, sign, POST, record, ack)",
  postgres: "PostgreSQL backends of the service's connections (the relay's, claim and attempt statements)",
  postgres_producer: "PostgreSQL backends of the producer's connections (inserting the events and their deliveries)",
  nats: "nats-server (publish, store, deliver, ack)",
  receiver: "the receiver process (TLS, HTTP, signature check)",
  producer: "the bench's producer (building and sending the events' inserts)",
} as const;
/** Where a delivery's CPU goes in the drain, beside the raw loop's per request: what the ratio is made of. */
const cpuMetrics = {
  ...Object.fromEntries(Object.entries(cpuLabels).map(([k, label]) => [`cpu_${k}_ms`, { label: `drain CPU per delivery: ${label}`, unit: "ms" }])),
  cpu_total_ms: { label: "drain CPU per delivery: all of the above", unit: "ms" },
  durable_raw_cpu_workers_ms: { label: "durable raw worker's CPU per delivery: its processes (claim, sign, POST, record)", unit: "ms" },
  durable_raw_cpu_postgres_ms: { label: "durable raw worker's CPU per delivery: PostgreSQL backends but the producer's (its claims and records; the service's connections sit idle)", unit: "ms" },
  durable_raw_cpu_total_ms: { label: "durable raw worker's CPU per delivery: all (its processes, PostgreSQL's backends, the receiver, the producer)", unit: "ms" },
  baseline_cpu_ms: { label: "raw POST loop's CPU per request: its client and the receiver", unit: "ms" },
};

/** Event → outbox → relay → JetStream → worker → HTTPS receiver, on a system of its own. */
export const deliveryScenario: Scenario = {
  name: "delivery",
  ownSystem: true,
  title: `Delivery pipeline end to end (outbox, relay, JetStream, ${1 + extraWorkers} worker processes, HTTPS receiver)`,
  metrics: {
    deliveries_per_s: { label: "deliveries/s sustained", unit: "/s", target: { op: ">=", value: 2000 } },
    durable_raw_per_s: {
      label: `baseline: durable raw worker, ${durableRawProcesses} processes (claim 64 in one statement, HMAC-SHA256, POST over keep-alive HTTPS, record the batch in one statement), the same events`,
      unit: "/s",
    },
    ratio: { label: "ratio to the durable raw worker", unit: "×", target: { op: ">=", value: 0.7 } },
    baseline_per_s: { label: "reference: raw signed POST loop (no durable work)", unit: "/s" },
    post_loop_ratio: { label: "reference: ratio to the raw POST loop", unit: "×" },
    offered_rate: { label: "offered rate achieved", unit: "events/s" },
    first_attempt_p50: { label: "1,000/s: commit → first attempt p50", unit: "ms" },
    first_attempt_p99: { label: "1,000/s: commit → first attempt p99", unit: "ms", target: { op: "<=", value: 250 } },
    steady_p50: { label: "300/s: commit → first attempt p50", unit: "ms", target: { op: "<=", value: 25 } },
    steady_p99: { label: "300/s: commit → first attempt p99", unit: "ms", target: { op: "<=", value: 150 } },
    ...stageMetrics,
    ...cpuMetrics,
  },
  async setup(ctx) {
    ({ system, receiver, secret, producer } = await startWebhookSystem(cleanup));
    for (let i = 0; i < extraWorkers; i++) await system.spawn(["worker"]);
    const client = new pg.Client({ connectionString: system.databaseUrl });
    await client.connect();
    await client.query(`create table ${durableRawTable} (like webhook_deliveries including all)`).finally(() => client.end());
    durableRawWorkers = [];
    await startDurableRaw();
    ctx.log(`delivery: system with ${system.processes.length} process(es), receiver on ${receiver.port}`);
  },
  async warmup(ctx) {
    await sustained(ctx, 500);
    await durableRaw(ctx, 500);
  },
  async run(ctx) {
    const n = ctx.quick ? 2000 : 20_000;
    const seconds = ctx.quick ? 3 : 10;
    await vacuumIfNoAutovacuum(ctx);
    const drain = await sustained(ctx, n);
    // The drain left three dead versions of each delivery row (published, processing, delivered).
    await vacuumIfNoAutovacuum(ctx);
    const raw = await durableRaw(ctx, n);
    await vacuumIfNoAutovacuum(ctx);
    const baseline = await rawLoop(seconds);
    const steady = await latencyAt(300, seconds);
    const latency = await latencyAt(1000, seconds);
    return {
      steady_p50: steady.p50,
      steady_p99: steady.p99,
      ...Object.fromEntries(
        Object.entries(steady.stages).flatMap(([stage, v]) => [
          [`stage_${stage}_p50`, v.p50],
          [`stage_${stage}_p99`, v.p99],
        ]),
      ),
      deliveries_per_s: drain.rate,
      durable_raw_per_s: raw.rate,
      ratio: drain.rate / raw.rate,
      baseline_per_s: baseline.rate,
      post_loop_ratio: drain.rate / baseline.rate,
      ...(raw.cpu
        ? {
            durable_raw_cpu_workers_ms: raw.cpu.workers,
            durable_raw_cpu_postgres_ms: raw.cpu.postgres,
            durable_raw_cpu_total_ms: Object.values(raw.cpu).reduce((a, b) => a + b, 0),
          }
        : {}),
      ...(drain.cpu
        ? {
            ...Object.fromEntries(Object.entries(drain.cpu).map(([k, v]) => [`cpu_${k}_ms`, v])),
            cpu_total_ms: Object.values(drain.cpu).reduce((a, b) => a + b, 0),
          }
        : {}),
      ...(baseline.cpu ? { baseline_cpu_ms: baseline.cpu.client + baseline.cpu.receiver } : {}),
      offered_rate: latency.achieved,
      first_attempt_p50: latency.p50,
      first_attempt_p99: latency.p99,
    };
  },
  async teardown() {
    await cleanup.run();
  },
};

/**
 * VACUUM (ANALYZE) the pipeline's tables as autovacuum would, only on a server that runs without
 * it (this machine's PostgreSQL has autovacuum off): otherwise every run measures on the dead
 * row versions of the runs before, which grow by three per delivery, and the latency phases run
 * on top of their drain's. With autovacuum on, the server does it and the bench leaves it alone.
 */
async function vacuumIfNoAutovacuum(ctx: BenchContext): Promise<void> {
  const client = new pg.Client({ connectionString: system.databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ autovacuum: string }>("show autovacuum");
    if (rows[0]?.autovacuum === "on") return;
    const t0 = performance.now();
    await client.query(`VACUUM (ANALYZE) webhook_deliveries, webhook_attempts, webhook_events, payment_intents, ${durableRawTable}`);
    ctx.log(`delivery: autovacuum is off on this server: vacuumed the pipeline's tables as it would have (${Math.round(performance.now() - t0)} ms)`);
  } finally {
    await client.end();
  }
}
