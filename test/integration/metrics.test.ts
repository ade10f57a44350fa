// /metrics on the ops port: scrape, act over REST, gRPC and webhooks, scrape again, and check that
// the right series moved by the right amounts, that the text parses strictly, and that it shows
// no key, secret, id or raw path.
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import pg from "pg";
import t from "tap";
import { IntentService } from "../../gen/payments/v1/payment_intents_pb.ts";
import { call, idemKey, merchantWithKey, sampleIntent, startTestApp, until } from "../helpers/harness.ts";
import { freePort } from "../helpers/processes.ts";
import type { RecordedRequest, Reply } from "../helpers/receiver.ts";
import { finished, hookHost, waitForDelivery, webhookSetup } from "../helpers/webhooks.ts";

type Labels = Record<string, string>;
interface Sample {
  name: string;
  labels: Labels;
  value: number;
}

const nameRe = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const sampleRe = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/;
const labelRe = /^([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\["\\n])*)"(?:,|$)/;

/** The Prometheus text format, strictly: every line a HELP or TYPE comment, or `name{labels} value`. */
function parse(text: string): Sample[] {
  if (!text.endsWith("\n")) throw new Error("the exposition does not end with a newline");
  const samples: Sample[] = [];
  for (const line of text.slice(0, -1).split("\n")) {
    if (line === "") continue;
    if (line.startsWith("#")) {
      const m = /^# (HELP|TYPE) (\S+) (.*)$/.exec(line);
      if (!m || !nameRe.test(m[2]!)) throw new Error(`bad comment line: ${line}`);
      if (m[1] === "TYPE" && !["counter", "gauge", "histogram", "summary", "untyped"].includes(m[3]!)) throw new Error(`bad TYPE: ${line}`);
      continue;
    }
    const m = sampleRe.exec(line);
    if (!m) throw new Error(`bad sample line: ${line}`);
    const labels: Labels = {};
    let rest = m[2] ?? "";
    while (rest !== "") {
      const l = labelRe.exec(rest);
      if (!l) throw new Error(`bad labels in: ${line}`);
      labels[l[1]!] = l[2]!.replace(/\\n/g, "\n").replace(/\\(["\\])/g, "$1");
      rest = rest.slice(l[0].length);
    }
    const raw = m[3]!;
    // Prometheus reads values as Go's ParseFloat does: NaN and Inf in any case (prom-client writes "Nan").
    const special: Record<string, number> = { "+inf": Infinity, inf: Infinity, "-inf": -Infinity, nan: NaN };
    const value = raw.toLowerCase() in special ? (special[raw.toLowerCase()] as number) : Number(raw);
    if (!(raw.toLowerCase() in special) && !/^-?\d+(\.\d+)?(e[+-]?\d+)?$/.test(raw)) throw new Error(`bad value in: ${line}`);
    samples.push({ name: m[1]!, labels, value });
  }
  return samples;
}

interface Scrape {
  text: string;
  samples: Sample[];
  /** The value of the one sample of `name` with exactly these labels (among others), 0 when absent. */
  value(name: string, labels?: Labels): number;
  has(name: string): boolean;
}

async function scrape(opsPort: number): Promise<Scrape> {
  const res = await fetch(`http://127.0.0.1:${opsPort}/metrics`);
  if (res.status !== 200) throw new Error(`/metrics answered ${res.status}`);
  if (!res.headers.get("content-type")?.startsWith("text/plain; version=0.0.4")) throw new Error(`content type ${res.headers.get("content-type")}`);
  const text = await res.text();
  const samples = parse(text);
  const matching = (name: string, labels: Labels) => samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  return {
    text,
    samples,
    value(name, labels = {}) {
      const found = matching(name, labels);
      if (found.length > 1) throw new Error(`${name} ${JSON.stringify(labels)} matches ${found.length} samples`);
      return found[0]?.value ?? 0;
    },
    has: (name) => samples.some((s) => s.name === name),
  };
}

const respond = (req: RecordedRequest): Reply => (req.url.startsWith("/gone") ? { status: 410, body: "gone" } : { status: 200, body: "ok" });
const s = await webhookSetup(t, { respond });
const ops = s.app.ports.ops;

t.test("the series move as requests, RPCs and webhook attempts happen", async (t) => {
  const before = await scrape(ops);
  for (const name of ["process_cpu_user_seconds_total", "nodejs_eventloop_lag_seconds", "payments_scrape_errors_total"]) t.ok(before.has(name), `${name} is exposed`);

  // Intents of a merchant without endpoints, so the webhook attempts below are the only ones.
  const m = await merchantWithKey(s.app);
  const create = `/api/v1/merchants/${m.merchant}/payment-intents`;
  const key = idemKey();
  const first = await call(s.base, "POST", create, { key: m.key, idempotencyKey: key, body: sampleIntent });
  t.equal(first.status, 200);
  t.equal((await call(s.base, "POST", create, { key: m.key, idempotencyKey: idemKey(), body: sampleIntent })).status, 200);
  const replay = await call(s.base, "POST", create, { key: m.key, idempotencyKey: key, body: sampleIntent });
  t.equal(replay.headers.get("idempotent-replayed"), "true");
  const conflict = await call(s.base, "POST", create, { key: m.key, idempotencyKey: key, body: { ...sampleIntent, requested_amount: "13.00" } });
  t.equal(conflict.body.error.code, "idempotency_conflict");
  const rawPath = `/api/v1/no-such-thing/${m.merchant}/secret-path-${idemKey()}`;
  t.equal((await call(s.base, "GET", rawPath, { key: m.key })).status, 404);
  const intentId: string = first.body.data.public_id;
  const client = createClient(IntentService, createGrpcTransport({ baseUrl: s.rpcUrl }));
  const got = await client.getPaymentIntent({ merchant: m.merchant, publicId: intentId }, { headers: { authorization: `Bearer ${m.key}` } });
  t.equal(got.data?.publicId, intentId);

  // One webhook delivered, one refused for good (410: terminal, one attempt).
  const ok = await s.createEndpoint("/ok/1");
  const gone = await s.createEndpoint("/gone/1");
  const deliveries: string[] = [];
  for (const ep of [ok, gone]) {
    const sent = await call(s.base, "POST", `/api/v1/merchants/${s.creds.merchant}/webhook-endpoints/${ep.id}/test`, { key: s.creds.key });
    t.equal(sent.status, 200);
    deliveries.push(sent.body.data.id);
  }
  const done = await Promise.all(deliveries.map((id) => waitForDelivery(s, id, finished, 20_000)));
  t.same(done.map((d) => d.status), ["delivered", "failed"]);

  // The worker counts an attempt right after recording it, a moment after the API shows it.
  const after = await until("the attempts are counted", async () => {
    const now = await scrape(ops);
    const counted = now.value("payments_webhook_first_attempt_delay_seconds_count") - before.value("payments_webhook_first_attempt_delay_seconds_count");
    return counted >= 2 ? now : undefined;
  }, 10_000);
  const moved = (name: string, labels: Labels = {}) => after.value(name, labels) - before.value(name, labels);

  const template = "/api/v1/merchants/{merchant}/payment-intents";
  const httpCount = "payments_http_request_duration_seconds_count";
  t.equal(moved(httpCount, { route: template, method: "POST", status: "200" }), 3, "two creates and a replay: 200");
  t.equal(moved(httpCount, { route: template, method: "POST", status: "409" }), 1, "the conflict: 409");
  t.equal(moved(httpCount, { route: "unmatched", method: "GET", status: "404" }), 1, "the unknown path: 404 as unmatched");
  t.equal(moved("payments_http_request_duration_seconds_bucket", { route: template, method: "POST", status: "200", le: "+Inf" }), 3);

  const rpcCount = "payments_rpc_duration_seconds_count";
  const createRpc = "payments.v1.IntentService/CreatePaymentIntent";
  t.equal(moved(rpcCount, { method: createRpc, code: "ok" }), 3, "creates and the replay, through the gateway in this process");
  t.equal(moved(rpcCount, { method: createRpc, code: "idempotency_conflict" }), 1);
  t.equal(moved(rpcCount, { method: "payments.v1.IntentService/GetPaymentIntent", code: "ok" }), 1, "the gRPC call");

  t.equal(moved("payments_idempotency_outcomes_total", { outcome: "replayed" }), 1);
  t.equal(moved("payments_idempotency_outcomes_total", { outcome: "conflict" }), 1);
  t.equal(moved("payments_idempotency_outcomes_total", { outcome: "in_progress" }), 0);

  t.equal(moved("payments_webhook_attempts_total", { outcome: "success", classification: "2xx" }), 1);
  t.equal(moved("payments_webhook_attempts_total", { outcome: "terminal", classification: "4xx" }), 1);
  t.equal(moved("payments_webhook_first_attempt_delay_seconds_count"), 2, "one first attempt per delivery");
  t.equal(moved("payments_scrape_errors_total", { source: "database" }), 0);
  t.equal(moved("payments_scrape_errors_total", { source: "nats" }), 0);

  // The gauges of this process's roles, read at scrape time.
  for (const name of [
    "payments_webhook_outbox_backlog",
    "payments_webhook_deliveries_pending_retry",
    "payments_scheduler_lag_seconds",
    "payments_jetstream_consumer_num_pending",
    "payments_jetstream_consumer_num_ack_pending",
    "payments_jetstream_consumer_num_redelivered",
  ]) {
    t.ok(after.has(name), `${name} is exposed`);
  }
  t.equal(after.value("payments_webhook_outbox_backlog"), 0, "everything was published");

  // Nothing that identifies a merchant, a key, a secret or a request.
  const forbidden = [m.merchant, m.key, m.keyId, s.creds.merchant, s.creds.key, s.creds.keyId, ok.secret, gone.secret, ok.id, gone.id, intentId, key, rawPath, "secret-path", hookHost, s.masterKey.toString("hex"), s.masterKey.toString("base64"), ...deliveries];
  for (const value of forbidden) t.notOk(after.text.includes(value), `/metrics does not show ${value.slice(0, 6)}…`);
  t.notOk(/\b(mer|pi|we|wd|evt|sk|whsec|req)_[A-Za-z0-9]{10,}/.test(after.text), "no id-shaped value at all");
});

t.test("scheduler lag: the oldest intent due for expiry and not expired", async (t) => {
  const db = new pg.Client({ connectionString: s.databaseUrl });
  await db.connect();
  t.teardown(() => db.end());
  const m = await merchantWithKey(s.app);
  // Locked by this connection, an intent is skipped by the scheduler (skip locked). The expiry is
  // committed first; should the scheduler expire it before the lock, another intent is tried.
  let held = false;
  for (let i = 0; i < 5 && !held; i++) {
    const created = await call(s.base, "POST", `/api/v1/merchants/${m.merchant}/payment-intents`, { key: m.key, idempotencyKey: idemKey(), body: sampleIntent });
    t.equal(created.status, 200);
    await db.query("update payment_intents set expires_at = now() - interval '60 seconds' where id = $1", [created.body.data.public_id]);
    await db.query("begin");
    const row = await db.query("select status from payment_intents where id = $1 for update", [created.body.data.public_id]);
    held = row.rows[0].status === "pending";
    if (!held) await db.query("rollback");
  }
  t.ok(held, "an overdue intent held pending");
  const lagged = await scrape(ops);
  const lag = lagged.value("payments_scheduler_lag_seconds");
  t.ok(lag >= 59 && lag < 3600, `lag ${lag} s: the oldest due intent is a minute overdue`);
  await db.query("commit");
  await until("the scheduler catches up", async () => (await scrape(ops)).value("payments_scheduler_lag_seconds") === 0, 10_000);
  t.pass("lag back to 0 once the intent expired");
});

t.test("NATS away: the outbox backlog grows, the consumer's gauges are left out and the error counted, the scrape answers", async (t) => {
  const port = await freePort();
  // WEBHOOK_CONNECT_TO lets the endpoint's test host pass the URL policy; nothing is ever sent.
  const w = await startTestApp(t, { NATS_URL: `nats://127.0.0.1:${port}`, WEBHOOK_CONNECT_TO: `${hookHost}:443:127.0.0.1:${port}` }, ["rpc", "gateway", "worker"]);
  const m = await merchantWithKey(w.app);
  const ep = await call(w.base, "POST", `/api/v1/merchants/${m.merchant}/webhook-endpoints`, { key: m.key, body: { url: `https://${hookHost}/ok/nats-away` } });
  t.equal(ep.status, 200);
  const before = await scrape(w.app.ports.ops);
  t.equal(before.value("payments_webhook_outbox_backlog"), 0);
  for (let i = 0; i < 3; i++) {
    const sent = await call(w.base, "POST", `/api/v1/merchants/${m.merchant}/webhook-endpoints/${ep.body.data.id}/test`, { key: m.key });
    t.equal(sent.status, 200);
  }
  const after = await scrape(w.app.ports.ops);
  t.equal(after.value("payments_webhook_outbox_backlog"), 3, "three deliveries wait in the outbox");
  t.equal(after.value("payments_webhook_deliveries_pending_retry"), 0, "none has had an attempt");
  for (const name of ["payments_jetstream_consumer_num_pending", "payments_jetstream_consumer_num_ack_pending", "payments_jetstream_consumer_num_redelivered"]) {
    t.notOk(after.has(name), `${name} is left out`);
  }
  t.equal(after.value("payments_scrape_errors_total", { source: "nats" }) - before.value("payments_scrape_errors_total", { source: "nats" }), 1);
  t.equal(after.value("payments_scrape_errors_total", { source: "database" }) - before.value("payments_scrape_errors_total", { source: "database" }), 0);
  t.notOk(after.has("payments_scheduler_lag_seconds"), "no scheduler role, no scheduler lag");
});

t.test("a scrape answers while the database refuses connections: its gauges are left out and the error counted", async (t) => {
  const dbName = new URL(s.databaseUrl).pathname.slice(1);
  const admin = new pg.Client({ connectionString: s.databaseUrl.replace(/\/[^/]*$/, "/postgres") });
  await admin.connect();
  t.teardown(async () => {
    await admin.query(`alter database ${dbName} with allow_connections true`);
    await admin.end();
  });
  const before = await scrape(ops);
  t.ok(before.has("payments_webhook_outbox_backlog"));
  await admin.query(`alter database ${dbName} with allow_connections false`);
  await admin.query("select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()", [dbName]);
  const down = await scrape(ops);
  t.equal(down.samples.filter((x) => x.name === "payments_webhook_outbox_backlog").length, 0, "no backlog value while the database is away");
  t.equal(down.samples.filter((x) => x.name === "payments_scheduler_lag_seconds").length, 0, "no scheduler lag either");
  t.equal(down.value("payments_scrape_errors_total", { source: "database" }) - before.value("payments_scrape_errors_total", { source: "database" }), 1);
  t.ok(down.has("payments_jetstream_consumer_num_pending"), "NATS gauges still answer");
  await admin.query(`alter database ${dbName} with allow_connections true`);
  await until("the gauges come back", async () => (await scrape(ops)).has("payments_webhook_outbox_backlog"), 15_000);
  t.pass("back with the database");
});

t.test("each process exposes its own roles' series", async (t) => {
  const rpcOnly = await startTestApp(t, {}, ["rpc"]);
  const text = (await scrape(rpcOnly.app.ports.ops)).samples.map((x) => x.name);
  t.ok(text.includes("payments_idempotency_outcomes_total"), "rpc: idempotency outcomes");
  t.ok(text.includes("process_cpu_user_seconds_total"), "default process metrics");
  for (const name of ["payments_http_request_duration_seconds_count", "payments_webhook_outbox_backlog", "payments_scheduler_lag_seconds", "payments_jetstream_consumer_num_pending", "payments_scrape_errors_total"]) {
    t.notOk(text.includes(name), `an rpc-only process has no ${name}`);
  }
  const gatewayOnly = await startTestApp(t, { RPC_URL: s.rpcUrl }, ["gateway"]);
  t.equal((await call(gatewayOnly.base, "GET", "/api/v1/nothing-here")).status, 404);
  const gw = await scrape(gatewayOnly.app.ports.ops);
  t.equal(gw.value("payments_http_request_duration_seconds_count", { route: "unmatched", method: "GET", status: "404" }), 1);
  for (const name of ["payments_rpc_duration_seconds_count", "payments_webhook_attempts_total", "payments_webhook_outbox_backlog", "payments_idempotency_outcomes_total"]) {
    t.notOk(gw.has(name), `a gateway-only process has no ${name}`);
  }
});

t.test("/metrics answers GET only", async (t) => {
  const res = await fetch(`http://127.0.0.1:${ops}/metrics`, { method: "POST" });
  t.equal(res.status, 405);
});
