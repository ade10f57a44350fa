import { Agent, request } from "node:http";
import { setTimeout as sleep } from "node:timers/promises";
import { startBaselineInsert } from "../baseline.ts";
import { meterGroups, meterMachine } from "../cpu.ts";
import { load } from "../load.ts";
import { startWebhookSystem, waitForArrivals, type WebhookSystem } from "../receiver.ts";
import { nowMs, percentile } from "../stats.ts";
import { Cleanup } from "../system.ts";
import type { BenchContext, RunResult, Scenario } from "../types.ts";

/**
 * The merchant's path (issue 66): REST creates of intents for a merchant with one endpoint, as
 * `npm start` runs the service plus two `worker` processes, each create's webhook timed at the
 * receiver from the create's response. Paced at 20/s (one at a time: the floor), 300/s and
 * 1,000/s, then flat out (against a raw node:http + pg insert in the same run), and the drain of
 * the webhooks the flat-out run left.
 * Where the time went, by stage, is read from the service's own records.
 */
const connections = 64;
const body = JSON.stringify({ network: "ethereum", asset: "USDC", requested_amount: "12.50", merchant_reference: "bench-order" });
const cleanup = new Cleanup();
let w: WebhookSystem;
let baseline: { url: string; pid: number };
/** The extra `worker` processes' pids. */
let workerPids: number[] = [];
let run = 0;

/** The create route and the merchant's headers, for the paced creates and the flat-out load alike. */
const creates = () => ({
  url: `${w.system.base}/api/v1/merchants/${w.system.merchant.id}/payment-intents`,
  headers: { authorization: `Bearer ${w.system.merchant.key}`, "content-type": "application/json" },
});

interface Created {
  id: string;
  sent: number;
  answered: number;
}

/** Creates at `perSecond` for `seconds`, each sent on time whatever the others take (open loop). */
async function pacedCreates(perSecond: number, seconds: number): Promise<Created[]> {
  const route = creates();
  const url = new URL(route.url);
  const agent = new Agent({ keepAlive: true, maxSockets: 256 });
  const tag = `merchant-path-${process.pid}-${++run}`;
  const created: Created[] = [];
  const failures: string[] = [];
  const inFlight = new Set<Promise<void>>();
  const one = (n: number) => {
    const sent = nowMs();
    const p = new Promise<void>((resolve) => {
      const req = request(
        url,
        {
          method: "POST",
          agent,
          headers: { ...route.headers, "idempotency-key": `${tag}-${n}` },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("end", () => {
            const answered = nowMs();
            const text = Buffer.concat(chunks).toString("utf8");
            if (res.statusCode === 200) created.push({ id: (JSON.parse(text) as { data: { public_id: string } }).data.public_id, sent, answered });
            else failures.push(`${res.statusCode} ${text.slice(0, 200)}`);
            resolve();
          });
        },
      );
      req.on("error", (err) => {
        failures.push(err.message);
        resolve();
      });
      req.end(body);
    });
    inFlight.add(p);
    void p.then(() => inFlight.delete(p));
  };
  const total = perSecond * seconds;
  const t0 = nowMs();
  let sent = 0;
  while (sent < total) {
    const due = Math.min(total, Math.floor(((nowMs() - t0) / 1000) * perSecond) + 1);
    while (sent < due) one(sent++);
    await sleep(2);
  }
  await Promise.all(inFlight);
  agent.destroy();
  if (failures.length > 0) throw new Error(`${failures.length} of ${total} creates failed, e.g. ${failures[0]}`);
  return created;
}

/** Each intent's payment.intent.created webhook and its stages as the service recorded them (ms since the epoch, PostgreSQL's clock). */
async function stagesOf(ids: readonly string[]): Promise<Map<string, { event: string; recorded: number; pickedUp: number; started: number }>> {
  const rows = await w.system.db.em.fork().execute<{ intent: string; event: string; recorded: number; picked_up: number; started: number }[]>(
    `select e.payment_intent_id as intent, e.id as event,
            extract(epoch from d.created_at) * 1000 as recorded,
            extract(epoch from d.published_at) * 1000 as picked_up,
            extract(epoch from a.started_at) * 1000 as started
       from webhook_events e
       join webhook_deliveries d on d.event_id = e.id
       left join webhook_attempts a on a.delivery_id = d.id and a.number = 1
      where e.type = 'payment.intent.created' and e.payment_intent_id = any(?::text[])`,
    [`{${ids.join(",")}}`],
  );
  return new Map(rows.map((r) => [r.intent, { event: r.event, recorded: Number(r.recorded), pickedUp: Number(r.picked_up), started: Number(r.started) }]));
}

/** A paced run's figures: create latency, create's response → webhook at the receiver, and each stage between. */
async function paced(ctx: BenchContext, perSecond: number, prefix: string): Promise<RunResult> {
  await w.receiver.reset();
  // From the first create to the last webhook's arrival: everything those creates made the machine do.
  const machine = meterMachine();
  const created = await pacedCreates(perSecond, ctx.quick ? 2 : 20);
  const ids = created.map((c) => c.id);
  const events = await stagesOf(ids);
  const arrivals = await waitForArrivals(w.receiver, [...events.values()].map((e) => e.event), 120_000);
  const cpu = machine.stop(created.length);
  // The attempts are recorded once they end: read the stages again now that every webhook arrived.
  const stages = await stagesOf(ids);
  const first = (c: Created) => arrivals.get(stages.get(c.id)!.event)![0]!;
  const p = (xs: number[]) => [percentile(xs, 50), percentile(xs, 99)] as const;
  const [createP50, createP99] = p(created.map((c) => c.answered - c.sent));
  // A webhook may arrive before the create's response does: that is 0 ms after it, for the merchant.
  const [firstP50, firstP99] = p(created.map((c) => Math.max(0, first(c) - c.answered)));
  const [relayP50, relayP99] = p(created.map((c) => stages.get(c.id)!.pickedUp - stages.get(c.id)!.recorded));
  const [workerP50, workerP99] = p(created.map((c) => stages.get(c.id)!.started - stages.get(c.id)!.pickedUp));
  const [postP50, postP99] = p(created.map((c) => first(c) - stages.get(c.id)!.started));
  return {
    [`${prefix}_create_p50`]: createP50,
    [`${prefix}_create_p99`]: createP99,
    [`${prefix}_first_p50`]: firstP50,
    [`${prefix}_first_p99`]: firstP99,
    [`${prefix}_relay_p50`]: relayP50,
    [`${prefix}_relay_p99`]: relayP99,
    [`${prefix}_worker_p50`]: workerP50,
    [`${prefix}_worker_p99`]: workerP99,
    [`${prefix}_post_p50`]: postP50,
    [`${prefix}_post_p99`]: postP99,
    [`${prefix}_machine_cpu`]: cpu?.msPerItem ?? Number.NaN,
    [`${prefix}_machine_kernel`]: cpu?.kernelMsPerItem ?? Number.NaN,
    [`${prefix}_machine_cores`]: cpu?.cores ?? Number.NaN,
  };
}

const stageMetrics = (prefix: string, rate: string, targets: { first50?: number; first99?: number } = {}) => ({
  [`${prefix}_create_p50`]: { label: `${rate}: create p50 (request → response)`, unit: "ms" },
  [`${prefix}_create_p99`]: { label: `${rate}: create p99`, unit: "ms" },
  [`${prefix}_first_p50`]: {
    label: `${rate}: create's response → its webhook at the receiver, p50`,
    unit: "ms",
    ...(targets.first50 ? { target: { op: "<=" as const, value: targets.first50 } } : {}),
  },
  [`${prefix}_first_p99`]: { label: `${rate}: … p99`, unit: "ms", ...(targets.first99 ? { target: { op: "<=" as const, value: targets.first99 } } : {}) },
  [`${prefix}_relay_p50`]: { label: `${rate}: stage: outbox row → picked up by the relay, p50`, unit: "ms" },
  [`${prefix}_relay_p99`]: { label: `${rate}: … p99`, unit: "ms" },
  [`${prefix}_worker_p50`]: { label: `${rate}: stage: picked up → attempt started (published, pulled, claimed, slot), p50`, unit: "ms" },
  [`${prefix}_worker_p99`]: { label: `${rate}: … p99`, unit: "ms" },
  [`${prefix}_post_p50`]: { label: `${rate}: stage: attempt started → request at the receiver, p50`, unit: "ms" },
  [`${prefix}_post_p99`]: { label: `${rate}: … p99`, unit: "ms" },
  [`${prefix}_machine_cpu`]: { label: `${rate}: the machine's CPU per create, every process (first create → last webhook)`, unit: "ms" },
  [`${prefix}_machine_kernel`]: { label: `${rate}: … of which in the kernel (system calls, interrupts, wake-ups)`, unit: "ms" },
  [`${prefix}_machine_cores`]: { label: `${rate}: … the cores in use meanwhile`, unit: "" },
});

export const merchantPathScenario: Scenario = {
  name: "merchant-path",
  ownSystem: true,
  title: `The merchant's path: REST creates → payment.intent.created at the merchant's endpoint, through npm start's roles and two more worker processes (paced 20/s, 300/s and 1,000/s; then flat out with ${connections} connections, and the drain)`,
  metrics: {
    ...stageMetrics("r20", "20/s (creates one at a time: the path's floor)"),
    ...stageMetrics("r300", "300/s", { first50: 10, first99: 50 }),
    ...stageMetrics("r1000", "1,000/s"),
    flat_rps: { label: "flat out: creates/s", unit: "/s" },
    flat_p99: { label: "flat out: create p99", unit: "ms", target: { op: "<=", value: 60 } },
    baseline_rps: { label: "baseline (node:http + pg insert) requests/s", unit: "/s" },
    flat_ratio: { label: "flat out: ratio to baseline", unit: "×", target: { op: ">=", value: 0.35 } },
    cpu_per_create: { label: "flat out: CPU per create (main service process, its threads and PostgreSQL)", unit: "ms" },
    cpu_event_loop: { label: "… of which the main process's event loop", unit: "ms" },
    cpu_threads: { label: "… its other threads (derivation, GC, libuv)", unit: "ms" },
    cpu_postgres: { label: "… PostgreSQL (every backend of the database: the workers' too)", unit: "ms" },
    cpu_workers: { label: "flat out: the worker processes' CPU per create (delivering meanwhile)", unit: "ms" },
    drain_left: { label: "webhooks not yet delivered when the flat-out run ended", unit: "" },
    drain_per_s: { label: "the drain of those: webhooks delivered per second", unit: "/s" },
  },
  async setup() {
    w = await startWebhookSystem(cleanup);
    // npm start's process runs every role; a merchant at volume adds workers.
    workerPids = [];
    for (let i = 0; i < Number(process.env.MP_WORKERS ?? 2); i++) workerPids.push((await w.system.spawn(["worker"])).child.pid as number);
    const b = await startBaselineInsert(w.system.databaseUrl, w.system.merchant.id);
    cleanup.teardown(() => b.stop());
    baseline = b;
  },
  async warmup() {
    await pacedCreates(100, 2);
  },
  async run(ctx) {
    const r20 = await paced(ctx, 20, "r20");
    const r300 = await paced(ctx, 300, "r300");
    const r1000 = await paced(ctx, 1000, "r1000");
    // Flat out, then the drain of what it left (first attempts only: the receiver answers 200).
    await w.receiver.reset();
    const seconds = ctx.quick ? 2 : 10;
    const since = new Date();
    const { system } = w;
    const workers = meterGroups({ workers: () => workerPids });
    const api = await load({
      ...creates(),
      method: "POST",
      body,
      connections,
      seconds,
      idempotencyKeys: true,
      cpu: { pid: system.servicePid, database: system.database },
    });
    const workerCpu = workers.stop(api.requests)?.workers ?? Number.NaN;
    const ended = nowMs();
    // The flat-out run's events by id: the paced runs' backlog may still be arriving, and is not counted.
    const ids = (
      await system.db.em.fork().execute<{ id: string }[]>(`select id from webhook_events where type = 'payment.intent.created' and created_at >= ?`, [since])
    ).map((r) => r.id);
    const n = ids.length;
    const delivered = async () => {
      const arrivals = await w.receiver.arrivals();
      return ids.filter((id) => arrivals.has(id)).length;
    };
    const arrived = await delivered();
    const deadline = Date.now() + 300_000;
    let last = arrived;
    while (last < n) {
      if (Date.now() > deadline) throw new Error(`${n - last} of ${n} webhooks not delivered within 300 s of the flat-out run`);
      await sleep(50);
      last = await delivered();
    }
    const drainSeconds = (nowMs() - ended) / 1000;
    const raw = await load({ url: baseline.url, method: "POST", headers: { "content-type": "application/json" }, body, connections, seconds });
    return {
      ...r20,
      ...r300,
      ...r1000,
      flat_rps: api.rps,
      flat_p99: api.p99,
      baseline_rps: raw.rps,
      flat_ratio: api.rps / raw.rps,
      cpu_per_create: api.cpu ? api.cpu.total - api.cpu.loadGenerator : Number.NaN,
      cpu_event_loop: api.cpu?.eventLoop ?? Number.NaN,
      cpu_threads: api.cpu?.otherThreads ?? Number.NaN,
      cpu_postgres: api.cpu?.postgres ?? Number.NaN,
      cpu_workers: workerCpu,
      drain_left: n - arrived,
      drain_per_s: n - arrived > 0 ? (n - arrived) / drainSeconds : Number.NaN,
    };
  },
  async teardown() {
    await cleanup.run();
  },
};
