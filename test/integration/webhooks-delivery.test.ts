// Delivery end to end: event → outbox → JetStream → worker → a local HTTPS
// receiver (test CA, reached through WEBHOOK_CONNECT_TO), with shortened schedules.
import { createHmac, timingSafeEqual } from "node:crypto";
import t from "tap";
import { call, idemKey, merchantWithKey, sampleIntent, until, type Credentials } from "../helpers/harness.ts";
import { failAbandoned } from "../../services/delivery/webhook-deliveries.ts";
import type { RecordedRequest, Reply } from "../helpers/receiver.ts";
import { consumerDrained, deliveryById, finished, hookHost, waitForDelivery, webhookSetup, type WebhookSetup } from "../helpers/webhooks.ts";

/** The receiver's behaviour is chosen by the URL path, so each endpoint tests one row. */
const seenPerPath = new Map<string, number>();
function respondByPath(req: RecordedRequest): Reply {
  const n = (seenPerPath.get(req.url) ?? 0) + 1;
  seenPerPath.set(req.url, n);
  const [, kind, arg] = req.url.split("/");
  switch (kind) {
    case "status":
      return { status: Number(arg), body: `status ${arg}` };
    case "redirect":
      return { status: Number(arg), headers: { location: `https://${hookHost}/status/200` } };
    case "destroy":
      return { status: 0, destroy: true };
    case "slow":
      return { status: 200, delayMs: 4000 };
    case "flaky":
      return n === 1 ? { status: 503, body: "try later" } : { status: 200, body: "ok" };
    case "big":
      return { status: 200, body: "x".repeat(200 * 1024) };
    default:
      return { status: 200, body: "ok" };
  }
}

const s = await webhookSetup(t, { respond: respondByPath, env: { WEBHOOK_TIMEOUT_MS: "2000" } });

async function sendTest(setup: WebhookSetup, c: Credentials, endpointId: string) {
  const res = await call(setup.base, "POST", `/api/v1/merchants/${c.merchant}/webhook-endpoints/${endpointId}/test`, { key: c.key });
  if (res.status !== 200) throw new Error(JSON.stringify(res.body));
  return res.body.data as { id: string; event_id: string };
}

t.test("outcome classification, one row per case (max 6 attempts)", async (t) => {
  const rows: { path: string; row: string; status: "delivered" | "failed"; attempts: number; outcome: string; code?: number; error?: string }[] = [
    { path: "/status/200", row: "2xx", status: "delivered", attempts: 1, outcome: "success", code: 200 },
    { path: "/status/204", row: "2xx", status: "delivered", attempts: 1, outcome: "success", code: 204 },
    { path: "/destroy", row: "transport error", status: "failed", attempts: 6, outcome: "retryable", error: "transport" },
    { path: "/slow", row: "timeout", status: "failed", attempts: 6, outcome: "retryable", error: "timeout" },
    { path: "/status/408", row: "408", status: "failed", attempts: 6, outcome: "retryable", code: 408 },
    { path: "/status/425", row: "425", status: "failed", attempts: 6, outcome: "retryable", code: 425 },
    { path: "/status/429", row: "429", status: "failed", attempts: 6, outcome: "retryable", code: 429 },
    { path: "/status/500", row: "5xx", status: "failed", attempts: 6, outcome: "retryable", code: 500 },
    { path: "/status/503", row: "5xx", status: "failed", attempts: 6, outcome: "retryable", code: 503 },
    { path: "/redirect/302", row: "3xx", status: "failed", attempts: 1, outcome: "terminal", code: 302 },
    { path: "/redirect/308", row: "3xx", status: "failed", attempts: 1, outcome: "terminal", code: 308 },
    { path: "/status/400", row: "4xx", status: "failed", attempts: 1, outcome: "terminal", code: 400 },
    { path: "/status/404", row: "4xx", status: "failed", attempts: 1, outcome: "terminal", code: 404 },
    { path: "/status/410", row: "4xx", status: "failed", attempts: 1, outcome: "terminal", code: 410 },
  ];
  // At most 16 enabled endpoints per merchant: spread the rows over merchants.
  const started = await Promise.all(
    rows.map(async (row, i) => {
      const c = i % 2 === 0 ? s.creds : await merchantWithKey(s.app);
      const ep = await s.createEndpoint(row.path, c);
      return { row, c, delivery: await sendTest(s, c, ep.id) };
    }),
  );
  for (const { row, c, delivery } of started) {
    const d = await waitForDelivery(s, delivery.id, finished, 20_000, c);
    const label = `${row.row} (${row.path})`;
    t.equal(d.status, row.status, `${label}: ${row.status}`);
    t.equal(d.attempt_count, row.attempts, `${label}: ${row.attempts} attempt(s)`);
    t.equal(d.attempts.length, row.attempts, `${label}: every attempt recorded`);
    t.ok(
      d.attempts.every((a: { outcome: string }) => a.outcome === row.outcome),
      `${label}: every attempt ${row.outcome}`,
    );
    t.same(d.attempts.map((a: { number: number }) => a.number), Array.from({ length: row.attempts }, (_, i) => i + 1));
    if (row.code !== undefined) {
      t.equal(d.last_status_code, row.code, `${label}: last status ${row.code}`);
      t.ok(d.attempts.every((a: { status_code: number }) => a.status_code === row.code));
    }
    if (row.error !== undefined) {
      t.equal(d.last_status_code, null);
      t.match(d.last_error, new RegExp(`^${row.error}`), `${label}: last error ${row.error}`);
      t.ok(d.attempts.every((a: { error: string }) => a.error === row.error));
    }
    if (row.status === "delivered") t.equal(d.last_error, null);
    t.equal(d.next_attempt_at, null, `${label}: nothing scheduled after the end`);
  }
  // Redirects are never followed: the receiver saw each redirecting delivery once, and nothing else for it.
  for (const { row, delivery } of started.filter((x) => x.row.path.startsWith("/redirect"))) {
    const forEvent = s.receiver.requests.filter((r) => r.headers["x-service-event-id"] === delivery.event_id);
    t.same(forEvent.map((r) => r.url), [row.path], `${row.path}: the Location was not followed`);
  }
  // No attempt beyond the 6th: once the consumer holds no message, none can come.
  await consumerDrained(s);
  for (const { row, delivery } of started.filter((x) => x.row.attempts === 6 && x.row.error !== "timeout")) {
    const forEvent = s.receiver.requests.filter((r) => r.headers["x-service-event-id"] === delivery.event_id);
    t.equal(forEvent.length, 6, `${row.path}: exactly 6 requests reached the receiver`);
  }
});

t.test("a retryable failure followed by success is delivered on the second attempt", async (t) => {
  const ep = await s.createEndpoint("/flaky/1");
  const sent = await sendTest(s, s.creds, ep.id);
  const d = await waitForDelivery(s, sent.id, finished, 20_000);
  t.equal(d.status, "delivered");
  t.same(
    d.attempts.map((a: { number: number; status_code: number; outcome: string; response_excerpt: string }) => [a.number, a.status_code, a.outcome, a.response_excerpt]),
    [
      [1, 503, "retryable", "try later"],
      [2, 200, "success", "ok"],
    ],
  );
  t.equal(d.last_status_code, 200);
  t.equal(d.last_error, null);
});

t.test("a response is read at most 64 KiB and kept as a 1 KiB excerpt", async (t) => {
  const ep = await s.createEndpoint("/big/1");
  const d = await waitForDelivery(s, (await sendTest(s, s.creds, ep.id)).id, finished, 20_000);
  t.equal(d.status, "delivered");
  t.equal(d.attempts[0].response_excerpt, "x".repeat(1024));
});

t.test("an address that is no longer public is a terminal security rejection at the attempt", async (t) => {
  const ep = await s.createEndpoint("/status/200");
  // As if the host's DNS now pointed into a private network.
  await s.app.db.em.fork().execute(`update webhook_endpoints set url = 'https://10.0.0.7/hook' where id = ?`, [ep.id]);
  const seen = s.receiver.requests.length;
  const d = await waitForDelivery(s, (await sendTest(s, s.creds, ep.id)).id, finished, 20_000);
  t.equal(d.status, "failed");
  t.equal(d.attempt_count, 1, "not retried");
  t.equal(d.attempts[0].outcome, "terminal");
  t.equal(d.attempts[0].error, "security");
  t.match(d.last_error, /private/);
  t.equal(s.receiver.requests.length, seen, "nothing was sent");
});

t.test("each request carries the stored bytes, signed as the spec says", async (t) => {
  // Every enabled endpoint of the merchant gets the event: this one is told apart by its path.
  const ep = await s.createEndpoint("/ok/signed");
  const pi = await call(s.base, "POST", `/api/v1/merchants/${s.creds.merchant}/payment-intents`, {
    key: s.creds.key,
    idempotencyKey: idemKey(),
    body: { ...sampleIntent, merchant_reference: "signed ✓ ünïcode" },
  });
  t.equal(pi.status, 200);
  const list = await call(s.base, "GET", `/api/v1/merchants/${s.creds.merchant}/webhook-deliveries?endpoint_id=${ep.id}`, { key: s.creds.key });
  t.equal(list.body.data.length, 1, "the new endpoint got the event");
  const delivery = await waitForDelivery(s, list.body.data[0].id, finished, 20_000);
  t.equal(delivery.status, "delivered");
  const req = s.receiver.requests.find((r) => r.headers["x-service-event-id"] === delivery.event_id && r.url === "/ok/signed")!;
  t.ok(req);
  t.equal(req.method, "POST");
  t.equal(req.headers["content-type"], "application/json");
  t.match(req.headers["user-agent"], /\S+/);
  const ts = req.headers["x-service-timestamp"] as string;
  t.match(ts, /^\d+$/);
  t.ok(Math.abs(Number(ts) - Date.now() / 1000) < 30, "unix seconds, now");
  const expected = createHmac("sha256", Buffer.from(ep.secret, "utf8"))
    .update(Buffer.concat([Buffer.from(ts, "ascii"), Buffer.from("."), req.body]))
    .digest();
  const given = Buffer.from(req.headers["x-service-signature"] as string, "hex");
  t.match(req.headers["x-service-signature"], /^[0-9a-f]{64}$/, "lowercase hex");
  t.ok(given.length === expected.length && timingSafeEqual(given, expected), "HMAC-SHA256(secret, timestamp.body) verifies");
  const event = await call(s.base, "GET", `/api/v1/merchants/${s.creds.merchant}/webhook-events/${delivery.event_id}`, { key: s.creds.key });
  const [stored] = await s.app.db.em.fork().execute<{ payload: string }[]>("select payload from webhook_events where id = ?", [delivery.event_id]);
  t.ok(req.body.equals(Buffer.from(stored!.payload, "utf8")), "the body is the event's stored bytes");
  t.same(JSON.parse(req.body.toString("utf8")), event.body.data, "GET webhook-events shows the envelope as delivered");
  t.equal(event.body.data.data.payment_intent.merchant_reference, "signed ✓ ünïcode");
});

t.test("replay sends the same event bytes again as a new delivery", async (t) => {
  const ep = await s.createEndpoint("/status/200");
  const original = await waitForDelivery(s, (await sendTest(s, s.creds, ep.id)).id, finished, 20_000);
  const replay = await call(s.base, "POST", `/api/v1/merchants/${s.creds.merchant}/webhook-deliveries/${original.id}/replay`, {
    key: s.creds.key,
    idempotencyKey: idemKey(),
  });
  t.equal(replay.status, 200);
  const again = await waitForDelivery(s, replay.body.data.id, finished, 20_000);
  t.equal(again.status, "delivered");
  t.equal(again.replay_of, original.id);
  const requests = s.receiver.requests.filter((r) => r.headers["x-service-event-id"] === original.event_id);
  t.equal(requests.length, 2, "delivered twice");
  t.ok(requests[0]!.body.equals(requests[1]!.body), "byte-identical bodies");
  for (const r of requests) {
    const sig = createHmac("sha256", ep.secret).update(`${r.headers["x-service-timestamp"]}.`).update(r.body).digest("hex");
    t.equal(r.headers["x-service-signature"], sig);
  }
});

t.test("retries follow the configured schedule (JetStream backoff)", async (t) => {
  const spaced = await webhookSetup(t, {
    respond: () => ({ status: 503 }),
    env: { WEBHOOK_RETRY_DELAYS: "0.3,0.6,0.9", WEBHOOK_MAX_ATTEMPTS: "4" },
  });
  const ep = await spaced.createEndpoint();
  const sent = await sendTest(spaced, spaced.creds, ep.id);
  const pending = await waitForDelivery(spaced, sent.id, (d) => d.status === "pending" && d.attempt_count === 1);
  t.ok(pending.next_attempt_at, "a pending retry shows when it is due");
  const d = await waitForDelivery(spaced, sent.id, finished, 20_000);
  t.equal(d.status, "failed");
  t.equal(d.attempt_count, 4, "max attempts 4");
  const at = spaced.receiver.requests.map((r) => r.at);
  t.equal(at.length, 4);
  const gaps = at.slice(1).map((v, i) => v - at[i]!);
  const schedule = [300, 600, 900];
  gaps.forEach((gap, i) => {
    t.ok(gap >= schedule[i]! - 25, `retry ${i + 1} came no earlier than ${schedule[i]} ms (${gap} ms)`);
    t.comment(`retry ${i + 1}: ${gap - schedule[i]!} ms after its time`);
  });
  const due = Date.parse(pending.next_attempt_at) - Date.parse(pending.attempts[0].started_at);
  t.ok(due >= 300 && due < 1300, `next_attempt_at is the attempt plus the first delay (${due} ms)`);
});

t.test("disabling an endpoint ends its pending deliveries and it receives nothing new", async (t) => {
  const slow = await webhookSetup(t, { respond: () => ({ status: 503 }), env: { WEBHOOK_RETRY_DELAYS: "30" } });
  const ep = await slow.createEndpoint();
  const sent = await sendTest(slow, slow.creds, ep.id);
  await waitForDelivery(slow, sent.id, (d) => d.status === "pending" && d.attempt_count === 1);
  const seen = slow.receiver.requests.length;
  const res = await call(slow.base, "POST", `/api/v1/merchants/${slow.creds.merchant}/webhook-endpoints/${ep.id}/disable`, { key: slow.creds.key });
  t.equal(res.status, 200);
  const d = await deliveryById(slow, sent.id);
  t.equal(d.status, "failed");
  t.equal(d.last_error, "endpoint_disabled");
  t.equal(d.next_attempt_at, null);
  // The sentinel: an enabled endpoint on the same receiver gets each new event; once it has all
  // three, the disabled one would have had its own by then.
  await slow.createEndpoint("/sentinel");
  const toDisabled = () => slow.receiver.requests.filter((r) => r.url !== "/sentinel").length;
  for (let i = 0; i < 3; i++) {
    const pi = await call(slow.base, "POST", `/api/v1/merchants/${slow.creds.merchant}/payment-intents`, {
      key: slow.creds.key,
      idempotencyKey: idemKey(),
      body: sampleIntent,
    });
    t.equal(pi.status, 200);
  }
  await until("the sentinel endpoint got the three events", async () => slow.receiver.requests.filter((r) => r.url === "/sentinel").length >= 3, 20_000);
  t.equal(toDisabled(), seen, "no request reached the disabled endpoint");
  const list = await call(slow.base, "GET", `/api/v1/merchants/${slow.creds.merchant}/webhook-deliveries?endpoint_id=${ep.id}`, { key: slow.creds.key });
  t.same(list.body.data.map((x: { id: string }) => x.id), [sent.id], "no new deliveries");
});

t.test("a delivery whose worker died during the last attempt ends failed (worker_lost)", async (t) => {
  const ep = await s.createEndpoint("/status/200");
  const sent = await waitForDelivery(s, (await sendTest(s, s.creds, ep.id)).id, finished, 20_000);
  // As a worker killed during attempt 6 leaves it: processing, and JetStream will not redeliver.
  await s.app.db.em
    .fork()
    .execute(`update webhook_deliveries set status = 'processing', attempt_count = 6, last_attempt_at = now() - interval '1 hour' where id = ?`, [sent.id]);
  const seqs = await failAbandoned(s.app.db.em.fork(), 6, 60_000);
  t.equal(seqs.length, 1, "its stream message is named for removal");
  const d = await deliveryById(s, sent.id);
  t.equal(d.status, "failed");
  t.equal(d.last_error, "worker_lost");
  const lost = d.attempts.find((a: { number: number }) => a.number === 6);
  t.same([lost?.outcome, lost?.error], ["unknown", "worker_lost"], "the lost attempt is recorded");
  t.same(await failAbandoned(s.app.db.em.fork(), 6, 60_000), [], "only once");
});
