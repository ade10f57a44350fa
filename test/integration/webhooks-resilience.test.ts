// Webhook delivery when processes and NATS fail: two worker processes sharing the
// durable consumer, a worker SIGKILLed mid-attempt, and NATS down while events are
// recorded. Real PostgreSQL, real NATS (the shared one, or a private nats-server),
// worker child processes (`main.ts worker`) and a local HTTPS receiver.
import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import t from "tap";
import { streamNames } from "../../services/delivery/jetstream.ts";
import { signPayload } from "../../services/delivery/signature.ts";
import { call, natsUrl, until } from "../helpers/harness.ts";
import { spawnService, startNatsServer, type ServiceProcess } from "../helpers/processes.ts";
import type { RecordedRequest } from "../helpers/receiver.ts";
import { startTcpProxy } from "../helpers/tcp-proxy.ts";
import { consumerDrained, deliveryById, finished, hookHost, waitForDelivery, webhookSetup, type WebhookSetup, createIntents, eventIdOf, workerEnv } from "../helpers/webhooks.ts";

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;


/** Every delivery of the merchant through the REST API, all pages. */
async function allDeliveries(s: WebhookSetup): Promise<Json[]> {
  const out: Json[] = [];
  let cursor: string | null = null;
  do {
    const q: string = `limit=200${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`;
    const res = await call(s.base, "GET", `/api/v1/merchants/${s.creds.merchant}/webhook-deliveries?${q}`, { key: s.creds.key });
    if (res.status !== 200) throw new Error(`list deliveries: ${res.status} ${JSON.stringify(res.body)}`);
    out.push(...res.body.data);
    cursor = res.body.next_cursor ?? null;
  } while (cursor);
  return out;
}

async function deliveryCounts(s: WebhookSetup): Promise<Record<string, number>> {
  const rows = await s.app.db.em.fork().execute<{ status: string; n: number }[]>(
    `select status, count(*)::int as n from webhook_deliveries group by status`,
  );
  return Object.fromEntries(rows.map((r) => [r.status, r.n]));
}


/** How often each event id reached the receiver. */
function arrivals(requests: readonly RecordedRequest[]): Map<string, number> {
  const m = new Map<string, number>();
  for (const r of requests) m.set(eventIdOf(r), (m.get(eventIdOf(r)) ?? 0) + 1);
  return m;
}

/** Waits until the durable consumer has at least `n` waiting pull requests (each worker keeps one). */
async function waitForPullers(prefix: string, n: number, workers: readonly ServiceProcess[]): Promise<void> {
  const names = streamNames(prefix);
  const nc = await connect({ servers: natsUrl });
  try {
    const jsm = await jetstreamManager(nc);
    let last = "";
    await until(
      `${n} workers pulling from ${names.consumer}`,
      async () => {
        const info = await jsm.consumers.info(names.stream, names.consumer).catch((err: Error) => {
          last = err.message;
          return undefined;
        });
        if (info) last = `num_waiting ${info.num_waiting}`;
        return info !== undefined && info.num_waiting >= n;
      },
      20_000,
      () => `${last}; worker output: ${workers.map((w) => w.output().slice(-500)).join(" || ")}`,
    );
  } finally {
    await nc.close();
  }
}

t.test("two worker processes share one consumer: every event reaches the endpoint exactly once", async (t) => {
  const masterKey = randomBytes(32);
  // 200 creates with one key as fast as the machine goes: past the per-key write limit on a fast one.
  const s = await webhookSetup(t, { roles: ["rpc", "gateway"], masterKey, env: { API_WRITE_RATE_LIMIT: "1000000" } });
  // Each worker reaches the receiver through its own TCP relay, so the relays' counts show who sent what.
  // The default retry schedule: the first ack deadline (60 s) is far beyond how long any message waits.
  const proxies = [await startTcpProxy(t, s.receiver.port), await startTcpProxy(t, s.receiver.port)];
  const workers = proxies.map((p) => spawnService(t, ["worker"], workerEnv(t, s, { WEBHOOK_CONNECT_TO: `${hookHost}:443:127.0.0.1:${p.port}` })));
  await Promise.all(workers.map((w) => w.started));
  await waitForPullers(s.prefix, 2, workers);

  const ep = await s.createEndpoint();
  const count = 200;
  const intents = await createIntents(s, count);
  t.equal(new Set(intents).size, count, `${count} payment intents created`);

  const createdAt = Date.now();
  await until(
    `all ${count} deliveries delivered`,
    async () => (await deliveryCounts(s)).delivered === count && s.receiver.requests.length >= count,
    60_000,
    () => `requests ${s.receiver.requests.length}; workers: ${workers.map((w) => w.output().slice(-800)).join(" || ")}`,
  );
  t.comment(`all ${count} delivered ${Date.now() - createdAt} ms after the last intent was created`);
  // A late duplicate could only come from a message JetStream still holds: none is left.
  await consumerDrained(s);

  const events = await s.app.db.em.fork().execute<{ id: string; type: string; payload: string }[]>(
    `select id, type, payload from webhook_events where merchant_id = ?`,
    [s.creds.merchant],
  );
  t.equal(events.length, count, "one event per intent");
  t.ok(events.every((e) => e.type === "payment.intent.created"), "all payment.intent.created");

  const got = arrivals(s.receiver.requests);
  const duplicates = [...got].filter(([, n]) => n > 1);
  const missing = events.filter((e) => !got.has(e.id)).map((e) => e.id);
  const unknown = [...got.keys()].filter((id) => !events.some((e) => e.id === id));
  t.equal(s.receiver.requests.length, count, "exactly one request per event");
  t.same(duplicates, [], "no event was sent twice");
  t.same(missing, [], "no event is missing");
  t.same(unknown, [], "nothing else was sent");
  const payloads = new Map(events.map((e) => [e.id, e.payload]));
  t.ok(
    s.receiver.requests.every((r) => r.url === new URL(ep.url).pathname && r.body.toString("utf8") === payloads.get(eventIdOf(r))),
    "each request carries its event's recorded bytes, to the endpoint's path",
  );
  t.ok(
    s.receiver.requests.every((r) => r.headers["x-service-signature"] === signPayload(ep.secret, Number(r.headers["x-service-timestamp"]), r.body)),
    "each request is signed with the endpoint's secret (the workers share the master key)",
  );

  const deliveries = await allDeliveries(s);
  t.equal(deliveries.length, count, "the delivery list shows one delivery per event");
  const notOnce = deliveries.filter((d) => d.status !== "delivered" || d.attempt_count !== 1 || d.attempts.length !== 1 || d.attempts[0].outcome !== "success");
  t.same(notOnce, [], "every delivery is delivered after exactly one attempt (attempt_count 1, one successful attempt)");

  t.ok(
    proxies.every((p) => p.connections > 0 && p.bytesFromClients > 0),
    `both workers sent requests (connections ${proxies.map((p) => p.connections).join(" / ")}, bytes ${proxies.map((p) => p.bytesFromClients).join(" / ")})`,
  );
  for (const w of workers) t.equal(w.child.exitCode, null, "the worker still runs");
});

t.test("a worker SIGKILLed mid-attempt loses nothing: another worker delivers the event again", async (t) => {
  const masterKey = randomBytes(32);
  // The first request is answered late: the worker is killed while it waits for the answer.
  const s = await webhookSetup(t, {
    roles: ["rpc", "gateway"],
    masterKey,
    respond: (_req, n) => (n === 1 ? { status: 200, body: "late", delayMs: 5000 } : { status: 200, body: "ok" }),
  });
  // Ack deadline of the first delivery: backoff[0] = 1 s; the attempt itself may take up to 8 s.
  const env = workerEnv(t, s, { WEBHOOK_RETRY_DELAYS: "1,1,1,1,1", WEBHOOK_TIMEOUT_MS: "8000" });
  const first = spawnService(t, ["worker"], env);
  await first.started;

  await s.createEndpoint();
  await createIntents(s, 1);
  const [request1] = await s.receiver.waitFor(1, 20_000);
  const rows = await allDeliveries(s);
  t.equal(rows.length, 1, "the intent's event has one delivery");
  const row = rows[0];
  const deliveryId: string = row.id;
  t.equal(eventIdOf(request1!), row.event_id, "the receiver got the event");

  // The attempt is in flight (the worker's heartbeat keeps its deadline from passing).
  const during = await deliveryById(s, deliveryId);
  t.match(during, { status: "processing", attempt_count: 1 }, "the delivery shows the attempt in progress");
  // The property is about a deadline passing, so this waits for the clock (not for something to
  // not happen): past the 1 s ack deadline, JetStream has redelivered nothing.
  await sleep(1500);
  t.equal(s.receiver.requests.length, 1, "no second attempt while the first is in flight, past the 1 s ack deadline");

  await first.kill("SIGKILL");
  t.equal(first.child.signalCode, "SIGKILL", "the first worker is gone");
  const second = spawnService(t, ["worker"], env);
  await second.started;

  const d = await waitForDelivery(s, deliveryId, finished, 30_000).catch((err: Error) => {
    throw new Error(`${err.message}; second worker: ${second.output().slice(-1500)}`);
  });
  t.equal(d.status, "delivered", "the delivery ends delivered");
  t.equal(d.attempt_count, 2, "two attempts counted");
  t.match(d.attempts, [
    { number: 1, outcome: "unknown", error: "worker_lost" },
    { number: 2, outcome: "success", status_code: 200 },
  ], "the lost attempt is recorded, then the successful one");
  t.equal(d.attempts.length, 2, "and no others");
  t.notOk(d.attempts[0].status_code, "the lost attempt has no status code");

  const requests = s.receiver.requests;
  t.equal(requests.length, 2, "the receiver saw the event twice (at least once)");
  t.equal(eventIdOf(requests[1]!), eventIdOf(requests[0]!), "the same event id");
  t.ok(requests[1]!.body.equals(requests[0]!.body), "the same bytes");
  // Once the consumer holds no message, no further attempt can be made.
  await consumerDrained(s);
  t.equal(s.receiver.requests.length, 2, "no further attempt once delivered");
  t.equal(second.child.exitCode, null, "the second worker still runs");
});

t.test("NATS down while events are recorded: the API keeps working, and every event is delivered once NATS is back", async (t) => {
  const nats = await startNatsServer(t);
  const s = await webhookSetup(t, { env: { NATS_URL: nats.url, WEBHOOK_RETRY_DELAYS: "0.5,0.5,0.5,0.5,0.5" } });
  // If the test stops early with NATS down, bring it back so the app can stop cleanly.
  t.teardown(async () => {
    await nats.start().catch(() => undefined);
  });

  await s.createEndpoint();
  await createIntents(s, 1);
  await s.receiver.waitFor(1, 20_000);
  await until("the first delivery delivered", async () => (await deliveryCounts(s)).delivered === 1, 15_000);

  await nats.stop();
  const count = 20;
  const intents = await createIntents(s, count, 5);
  t.equal(intents.length, count, `${count} payment intents created while NATS is down`);
  const ready = await fetch(`http://127.0.0.1:${s.app.ports.ops}/readyz`);
  t.not(ready.status, 200, "readiness reports NATS down");
  // With the broker down no worker can receive a delivery; the outbox holds them (below).
  t.equal(s.receiver.requests.length, 1, "nothing is delivered while NATS is down");
  t.same(await deliveryCounts(s), { delivered: 1, pending: count }, "the new deliveries wait, pending");

  const restarted = Date.now();
  await nats.start();
  let counts: Record<string, number> = {};
  await until(
    `all ${count + 1} deliveries delivered after NATS is back`,
    async () => (counts = await deliveryCounts(s)).delivered === count + 1 && s.receiver.requests.length >= count + 1,
    45_000,
    () => `requests ${s.receiver.requests.length}, deliveries ${JSON.stringify(counts)}`,
  );
  t.comment(`all delivered ${Date.now() - restarted} ms after nats-server was started again`);
  // A late duplicate could only come from a message JetStream still holds: none is left.
  await consumerDrained(s);

  const events = await s.app.db.em.fork().execute<{ id: string }[]>(`select id from webhook_events where merchant_id = ?`, [s.creds.merchant]);
  t.equal(events.length, count + 1, "every event was recorded");
  const got = arrivals(s.receiver.requests);
  t.equal(s.receiver.requests.length, count + 1, "one request per event");
  t.same(events.filter((e) => got.get(e.id) !== 1).map((e) => [e.id, got.get(e.id) ?? 0]), [], "every event arrived exactly once");
  const deliveries = await allDeliveries(s);
  t.equal(deliveries.length, count + 1, "the delivery list shows one delivery per event");
  t.same(deliveries.filter((d) => d.status !== "delivered" || d.attempt_count !== 1), [], "every delivery delivered after one attempt");
  const readyAgain = await fetch(`http://127.0.0.1:${s.app.ports.ops}/readyz`);
  t.equal(readyAgain.status, 200, "readiness recovers");
});

// A worker pulls no more messages than it can start: a message waiting in a client-side
// buffer gets no working() heartbeats, and once it had waited longer than backoff[0]
// JetStream would redeliver it, so an event would be sent twice although no worker failed.
t.test("a backlog larger than the worker's concurrency is sent once per event", async (t) => {
  const masterKey = randomBytes(32);
  const s = await webhookSetup(t, { roles: ["rpc", "gateway"], masterKey, respond: () => ({ status: 200, body: "ok", delayMs: 1500 }) });
  await s.createEndpoint();
  const count = 6;
  await createIntents(s, count); // the backlog: recorded before any worker runs
  const worker = spawnService(t, ["worker"], workerEnv(t, s, { WEBHOOK_RETRY_DELAYS: "1,1,1,1,1", WEBHOOK_TIMEOUT_MS: "8000", WEBHOOK_CONCURRENCY: "2" }));
  await worker.started;
  await until("every delivery delivered", async () => (await deliveryCounts(s)).delivered === count, 30_000, () => worker.output().slice(-1000));
  // Copies in the worker's buffer would be messages delivered and not acknowledged: none is left.
  await consumerDrained(s);
  const got = arrivals(s.receiver.requests);
  t.equal(got.size, count, "every event arrived");
  t.equal(s.receiver.requests.length, count, `one request per event (got ${s.receiver.requests.length})`);
  const deliveries = await allDeliveries(s);
  t.same(deliveries.filter((d) => d.attempt_count !== 1).map((d) => [d.id, d.attempt_count, d.attempts.map((a: Json) => a.error ?? a.outcome)]), [], "one attempt per delivery");
});
