// Delivery guarantees on the machine's own nats-server (2.9.10 here): retries on schedule while
// other deliveries wait on longer backoffs (nats-server #6085), terminal outcomes leave nothing
// behind in JetStream, installations on one NATS cannot take each other's deliveries, a database
// outage strands nothing, and an event is served exactly as it was delivered.
import { mkdtempSync, rmSync, chmodSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import t from "tap";
import { startEmbeddedPostgres } from "../../services/app/embedded-postgres.ts";
import { streamNames } from "../../services/delivery/jetstream.ts";
import { recordEvent } from "../../services/events/record.ts";
import { freePort } from "../../services/platform/listen.ts";
import { call, idemKey, natsUrl, sampleIntent, startTestApp, until } from "../helpers/harness.ts";
import type { RecordedRequest } from "../helpers/receiver.ts";
import { finished, waitForDelivery, webhookSetup, type WebhookSetup } from "../helpers/webhooks.ts";

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;


/** Answers per endpoint path: the given statuses in turn, then the last one for ever. */
function byPath(plan: Record<string, number[]>) {
  const seen = new Map<string, number>();
  return (req: RecordedRequest) => {
    const n = (seen.get(req.url) ?? 0) + 1;
    seen.set(req.url, n);
    const statuses = plan[req.url] ?? [200];
    return { status: statuses[Math.min(n, statuses.length) - 1]!, body: "x" };
  };
}

async function sendTest(s: WebhookSetup, endpointId: string): Promise<string> {
  const res = await call(s.base, "POST", `/api/v1/merchants/${s.creds.merchant}/webhook-endpoints/${endpointId}/test`, { key: s.creds.key });
  if (res.status !== 200) throw new Error(`test event: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data.id;
}

/** The wait before each retry: from the end of attempt n to the start of attempt n+1, ms. */
function gaps(d: Json): number[] {
  const a = d.attempts as Json[];
  return a.slice(1).map((next, i) => Date.parse(next.started_at) - (Date.parse(a[i].started_at) + a[i].duration_ms));
}

async function consumerState(prefix: string) {
  const names = streamNames(prefix);
  const nc = await connect({ servers: natsUrl });
  try {
    const jsm = await jetstreamManager(nc);
    const [si, ci] = await Promise.all([jsm.streams.info(names.stream), jsm.consumers.info(names.stream, names.consumer)]);
    return { messages: si.state.messages, ackPending: ci.num_ack_pending, pending: ci.num_pending, deliveredStreamSeq: ci.delivered.stream_seq };
  } finally {
    await nc.close();
  }
}

t.test("retries come on schedule while other deliveries wait on longer backoffs (nats-server #6085)", async (t) => {
  // Endpoint a always fails and sits in its 30 s backoff; b fails once and c twice, then recover.
  const delays = [1000, 4000, 30_000];
  const s = await webhookSetup(t, {
    env: { WEBHOOK_RETRY_DELAYS: "1,4,30", WEBHOOK_MAX_ATTEMPTS: "4" },
    respond: byPath({ "/a": [503], "/b": [503, 200], "/c": [503, 503, 200] }),
  });
  const [a, b, c] = [await s.createEndpoint("/a"), await s.createEndpoint("/b"), await s.createEndpoint("/c")];
  const da = await sendTest(s, a.id);
  const waiting = await waitForDelivery(s, da, (d) => d.attempt_count === 3 && d.status === "pending", 20_000);
  t.ok(Date.parse(waiting.next_attempt_at) - Date.now() > 20_000, "a waits on its 30 s backoff");

  const [db, dc] = [await sendTest(s, b.id), await sendTest(s, c.id)];
  const got = [await waitForDelivery(s, db, finished, 20_000), await waitForDelivery(s, dc, finished, 20_000)];
  for (const [name, d, attempts] of [["b", got[0], 2], ["c", got[1], 3]] as const) {
    t.equal(d.status, "delivered", `${name} is delivered`);
    t.equal(d.attempts.length, attempts, `${name} after ${attempts} attempts`);
    gaps(d).forEach((gap, i) => {
      t.ok(gap >= delays[i]! - 50 && gap <= delays[i]! + 1000, `${name}: retry ${i + 1} ${gap} ms after attempt ${i + 1} ended (due after ${delays[i]} ms)`);
    });
  }
  const still = await waitForDelivery(s, da, () => true);
  t.match(still, { status: "pending", attempt_count: 3 }, "meanwhile a still waits for its fourth attempt");
});

t.test("successes, terminal outcomes and exhausted retries leave no message behind in JetStream", async (t) => {
  const s = await webhookSetup(t, {
    env: { WEBHOOK_MAX_ATTEMPTS: "3" },
    respond: byPath({ "/ok": [200], "/gone": [410], "/bad": [400], "/down": [503] }),
  });
  const ids: string[] = [];
  for (const p of ["/ok", "/gone", "/bad", "/down"]) ids.push(await sendTest(s, (await s.createEndpoint(p)).id));
  const ends = await Promise.all(ids.map((id) => waitForDelivery(s, id, finished, 20_000)));
  t.same(ends.map((d) => [d.status, d.attempt_count]), [["delivered", 1], ["failed", 1], ["failed", 1], ["failed", 3]]);
  const state = await until("no message left", async () => {
    const st = await consumerState(s.prefix);
    return st.messages === 0 && st.ackPending === 0 ? st : undefined;
  }, 5000, () => "messages or ack-pending remain");
  t.same(state, { messages: 0, ackPending: 0, pending: 0, deliveredStreamSeq: state.deliveredStreamSeq }, "stream empty, nothing ack-pending");
});

t.test("two installations on one NATS cannot take each other's deliveries", async (t) => {
  t.test("the same JETSTREAM_PREFIX for two databases: the second installation is refused", async (t) => {
    const first = await startTestApp(t, {}, ["worker"]);
    await t.rejects(startTestApp(t, { JETSTREAM_PREFIX: first.prefix }, ["worker"]), {
      message: new RegExp(`^JETSTREAM_PREFIX "${first.prefix}" belongs to another installation .*set JETSTREAM_PREFIX`),
    });
    // The same database (another process of the same installation) shares the prefix. A subtest,
    // so that this process stops before the database goes.
    await t.test("another process of the same installation", async (t) => {
      const again = await startTestApp(t, { JETSTREAM_PREFIX: first.prefix, DATABASE_URL: first.databaseUrl }, ["worker"], first.masterKey);
      t.equal(again.prefix, first.prefix, "starts on the same prefix");
    });
  });

  t.test("unset, each installation gets a prefix of its own and delivers all of its events", async (t) => {
    const one = await webhookSetup(t, { env: { JETSTREAM_PREFIX: "" } });
    const two = await webhookSetup(t, { env: { JETSTREAM_PREFIX: "" } });
    t.match(one.prefix, /^payments-[A-Za-z0-9]{10}$/);
    t.match(two.prefix, /^payments-[A-Za-z0-9]{10}$/);
    t.not(one.prefix, two.prefix, "different prefixes");
    const sent = { one: [] as string[], two: [] as string[] };
    const [e1, e2] = [await one.createEndpoint(), await two.createEndpoint()];
    for (let i = 0; i < 10; i++) {
      sent.one.push(await sendTest(one, e1.id));
      sent.two.push(await sendTest(two, e2.id));
    }
    for (const [name, s, ids] of [["one", one, sent.one], ["two", two, sent.two]] as const) {
      const ends = await Promise.all(ids.map((id) => waitForDelivery(s, id, finished, 20_000)));
      t.ok(ends.every((d) => d.status === "delivered" && d.attempt_count === 1), `${name}: all 10 delivered, once each`);
      t.equal(s.receiver.requests.length, 10, `${name}: its receiver got its 10 events`);
    }
  });

  t.test("a delivery id the database does not know is left in the stream for its owner", async (t) => {
    const s = await startTestApp(t, {}, ["worker"]);
    const names = streamNames(s.prefix);
    const nc = await connect({ servers: natsUrl });
    t.teardown(() => nc.close());
    await until("the delivery stream", async () => (await jetstreamManager(nc)).streams.info(names.stream).then(() => true, () => false), 10_000);
    const ack = await jetstream(nc).publish(names.subject, "wd_NotThisInstallationsDelivery0", { msgID: "wd_NotThisInstallationsDelivery0" });
    const st = await until("the worker saw it", async () => {
      const x = await consumerState(s.prefix);
      return x.deliveredStreamSeq >= ack.seq ? x : undefined;
    }, 10_000);
    await sleep(300);
    const after = await consumerState(s.prefix);
    t.equal(after.messages, 1, "the message is still in the stream (not acknowledged, not terminated)");
    t.ok(st.deliveredStreamSeq >= ack.seq, "after the worker received it");
  });
});

t.test("a database outage of 20 s strands nothing: every delivery ends delivered once it is back", async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), "payments-outage-"));
  chmodSync(dir, 0o755);
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const pgOptions = { dataDir: path.join(dir, "pg"), port: await freePort(), user: "payments", password: "outage-test", database: "payments" };
  let pg = await startEmbeddedPostgres(pgOptions);
  // Teardowns run last-registered first: this one after the app has stopped.
  t.teardown(() => pg.stop());
  let receiverUp = false;
  const s = await webhookSetup(t, {
    env: { DATABASE_URL: pg.url, WEBHOOK_RETRY_DELAYS: "1,2,3,4,5" },
    respond: () => (receiverUp ? { status: 200, body: "ok" } : { status: 503, body: "down" }),
  });
  await s.createEndpoint();
  for (let i = 0; i < 10; i++) {
    const res = await call(s.base, "POST", `/api/v1/merchants/${s.creds.merchant}/payment-intents`, { key: s.creds.key, idempotencyKey: idemKey(), body: sampleIntent });
    t.equal(res.status, 200);
  }
  const count = async (sql: string) => (await s.app.db.em.fork().execute<{ n: number }[]>(sql))[0]!.n;
  await until("every delivery failed its first attempt", async () => (await count(`select count(*)::int as n from webhook_deliveries where attempt_count >= 1 and status = 'pending'`)) === 10, 20_000);

  await pg.stop();
  await sleep(20_000);
  pg = await startEmbeddedPostgres(pgOptions);
  receiverUp = true;
  const back = Date.now();

  let rows: Json[] = [];
  await until("all 10 delivered", async () => {
    rows = await s.app.db.em.fork().execute(`select id, status, attempt_count from webhook_deliveries`).catch(() => []);
    return rows.length === 10 && rows.every((r) => r.status === "delivered");
  }, 60_000, () => JSON.stringify(rows));
  t.comment(`all delivered ${Date.now() - back} ms after the database came back`);
  t.ok(rows.every((r) => r.attempt_count <= 6), "within the 6 attempts");
  const attempts = await s.app.db.em.fork().execute<Json[]>(`select delivery_id, number, outcome, error from webhook_attempts order by delivery_id, number`);
  t.same(attempts.filter((a) => a.error === "worker_lost" || a.outcome === null), [], "no attempt recorded as lost, none left open");
  const oks = s.receiver.requests.filter((r) => receiverUp && r.at >= back);
  t.equal(new Set(oks.map((r) => r.headers["x-service-event-id"])).size, 10, "each of the 10 events reached the endpoint after the outage");
});

t.test("a delivery whose message is lost from JetStream is published again and delivered", async (t) => {
  // Stranded after 2 × 1 s, at least 10 s, plus the 2 s timeout: 12 s past its due time.
  const s = await webhookSetup(t, { env: { WEBHOOK_RETRY_DELAYS: "1,1,1,1,1" }, respond: byPath({ "/lost": [503, 200] }) });
  const ep = await s.createEndpoint("/lost");
  const id = await sendTest(s, ep.id);
  await waitForDelivery(s, id, (d) => d.attempt_count === 1 && d.status === "pending", 10_000);
  const nc = await connect({ servers: natsUrl });
  t.teardown(() => nc.close());
  await (await jetstreamManager(nc)).streams.purge(streamNames(s.prefix).stream);
  const lostAt = Date.now();
  const d = await waitForDelivery(s, id, finished, 40_000);
  t.comment(`delivered ${Date.now() - lostAt} ms after its message was purged`);
  t.match(d, { status: "delivered", attempt_count: 2 }, "delivered on its second attempt");
  t.same(d.attempts.map((a: Json) => a.outcome), ["retryable", "success"], "no attempt lost or repeated");
  t.equal(s.receiver.requests.length, 2, "the endpoint saw two requests");
});

t.test("an event is served exactly as it was delivered, including a created_at with 0 milliseconds", async (t) => {
  const s = await webhookSetup(t);
  const ep = await s.createEndpoint();
  const wholeSecond = new Date(Math.floor(Date.now() / 1000) * 1000 - 1000);
  const recorded = await s.app.db.em.fork().transactional((tx) =>
    recordEvent(tx, {
      merchantId: s.creds.merchant,
      environment: "test",
      type: "webhook.test",
      data: { test: { synthetic: true, environment: "test", endpoint_id: ep.id } },
      endpointId: ep.id,
      createdAt: wholeSecond,
    }),
  );
  t.match(recorded.payload, /"created_at":"[^"]+:\d\d\.000Z"/, "the clock was set to a whole second");
  const res = await call(s.base, "POST", `/api/v1/merchants/${s.creds.merchant}/payment-intents`, { key: s.creds.key, idempotencyKey: idemKey(), body: sampleIntent });
  t.equal(res.status, 200);
  const requests = await s.receiver.waitFor(2, 15_000);
  for (const r of requests) {
    const id = String(r.headers["x-service-event-id"]);
    const got = await fetch(`${s.base}/api/v1/merchants/${s.creds.merchant}/webhook-events/${id}`, { headers: { authorization: `Bearer ${s.creds.key}` } });
    t.equal(await got.text(), `{"data":${r.body.toString("utf8")}}`, `GET ${id} is {"data": <the delivered bytes>}`);
  }
});
