// A webhook receiver that misbehaves, then recovers: first nothing listens on its port
// (connection refused), then it answers slower than WEBHOOK_TIMEOUT_MS, then it answers 200.
// Each attempt is recorded with its classification, the retries keep to the schedule, and the
// delivery ends delivered. And a receiver whose answers the database will not store cannot hold
// up anyone's deliveries. Real PostgreSQL, NATS and HTTPS; the app runs in this process.
import net from "node:net";
import t from "tap";
import { call, merchantWithKey, until, type Credentials } from "../helpers/harness.ts";
import { freePort } from "../helpers/processes.ts";
import { finished, hookHost, waitForDelivery, webhookSetup, type WebhookSetup } from "../helpers/webhooks.ts";

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

const delaysSeconds = [1, 1, 2, 2, 3];
const timeoutMs = 500;
// Timestamps are kept in milliseconds and the broker's timers are not exact to the millisecond.
const toleranceMs = 50;

/** A TCP relay on a fixed loopback port to the receiver: until it starts, that port refuses connections. */
async function relayOn(t: { teardown(fn: () => unknown): void }, port: number, targetPort: number): Promise<void> {
  const sockets = new Set<net.Socket>();
  const track = (s: net.Socket) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
    s.on("error", () => undefined);
  };
  const server = net.createServer((client) => {
    const upstream = net.connect(targetPort, "127.0.0.1");
    track(client);
    track(upstream);
    client.pipe(upstream);
    upstream.pipe(client);
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => resolve());
  });
  t.teardown(async () => {
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const s of sockets) s.destroy();
    await closed;
  });
}

t.test("refused, then too slow, then 200: every attempt classified, on schedule, and the delivery ends delivered", async (t) => {
  const port = await freePort();
  const s = await webhookSetup(t, {
    env: {
      WEBHOOK_CONNECT_TO: `${hookHost}:443:127.0.0.1:${port}`,
      WEBHOOK_RETRY_DELAYS: delaysSeconds.join(","),
      WEBHOOK_TIMEOUT_MS: String(timeoutMs),
    },
    // Once reachable: the first two requests are answered well after the timeout, later ones at once.
    respond: (_req, n) => (n <= 2 ? { status: 200, body: "late", delayMs: 4 * timeoutMs } : { status: 200, body: "ok" }),
  });
  const ep = await s.createEndpoint();
  const sent = await call(s.base, "POST", `/api/v1/merchants/${s.creds.merchant}/webhook-endpoints/${ep.id}/test`, { key: s.creds.key });
  t.equal(sent.status, 200, sent.status === 200 ? "a webhook.test sent" : JSON.stringify(sent.body));
  const deliveryId: string = sent.body.data.id;

  // Nothing listens yet: two attempts fail to connect, and the delivery waits for its retry.
  const refused = await waitForDelivery(s, deliveryId, (d) => d.attempt_count >= 2 && d.status === "pending", 20_000);
  t.match(refused.last_error, /^connect: ECONNREFUSED/, `a refused connection says so (${refused.last_error})`);
  t.equal(refused.last_status_code, null, "no status code without a response");
  const last = refused.attempts[refused.attempts.length - 1];
  const lastEnd = Date.parse(last.started_at) + last.duration_ms;
  t.ok(
    Date.parse(refused.next_attempt_at) >= lastEnd + delaysSeconds[refused.attempt_count - 1]! * 1000 - toleranceMs,
    `next_attempt_at (${refused.next_attempt_at}) is the schedule's delay after the last attempt ended`,
  );
  t.equal(s.receiver.requests.length, 0, "nothing reached the receiver");

  await relayOn(t, port, s.receiver.port);
  const d = await waitForDelivery(s, deliveryId, (x) => x.status === "delivered" || x.status === "failed", 30_000);
  t.equal(d.status, "delivered", "the delivery ends delivered once the receiver recovers");
  t.equal(d.next_attempt_at, null, "nothing scheduled after it");
  t.equal(d.last_status_code, 200);
  t.equal(d.last_error, null, "no error left once delivered");

  const attempts: Json[] = d.attempts;
  t.same(attempts.map((a) => a.number), attempts.map((_, i) => i + 1), "attempts numbered 1, 2, …");
  t.equal(d.attempt_count, attempts.length, "attempt_count counts them all");
  const kinds = attempts.map((a) => a.error ?? (a.outcome === "success" ? "success" : `${a.outcome} ${a.status_code}`));
  // Refused until the relay started (at least the two seen above), then the two slow answers, then 200.
  t.match(kinds.join(" "), /^(connect ){2,}timeout timeout success$/, `refused, refused…, timeout, timeout, success: ${kinds.join(", ")}`);
  for (const a of attempts.filter((x) => x.error)) {
    t.match(a, { outcome: "retryable", status_code: null, response_excerpt: null }, `attempt ${a.number} (${a.error}) is retryable, with no status code`);
  }
  t.ok(
    attempts.filter((a) => a.error === "timeout").every((a) => a.duration_ms >= timeoutMs - toleranceMs),
    "a timed-out attempt lasted the timeout",
  );
  t.match(attempts[attempts.length - 1], { outcome: "success", status_code: 200, error: null, response_excerpt: "ok" }, "the last attempt succeeded");

  // Attempt n+1 never starts before attempt n ended plus delay n.
  const early = attempts.slice(1).flatMap((a, i) => {
    const prev = attempts[i];
    const due = Date.parse(prev.started_at) + prev.duration_ms + delaysSeconds[i]! * 1000;
    return Date.parse(a.started_at) < due - toleranceMs ? [`attempt ${a.number} at ${a.started_at}, due ${new Date(due).toISOString()}`] : [];
  });
  t.same(early, [], "no retry before its delay");
  t.comment(
    `retry n+1 started this long after attempt n ended plus delay n: ${attempts
      .slice(1)
      .map((a, i) => Date.parse(a.started_at) - (Date.parse(attempts[i].started_at) + attempts[i].duration_ms + delaysSeconds[i]! * 1000))
      .join(", ")} ms`,
  );

  const requests = s.receiver.requests.filter((r) => r.headers["x-service-event-id"] === sent.body.data.event_id);
  t.equal(requests.length, 3, "the receiver saw the two timed-out attempts and the successful one");
  t.ok(requests.every((r) => r.body.equals(requests[0]!.body)), "each with the same bytes");

  const [open] = await s.app.db.em.fork().execute<{ deliveries: number; attempts: number }[]>(
    `select (select count(*)::int from webhook_deliveries where status = 'processing') as deliveries,
            (select count(*)::int from webhook_attempts where outcome is null) as attempts`,
  );
  t.same(open, { deliveries: 0, attempts: 0 }, "nothing stays processing: no delivery, and no attempt without its outcome");
});

/**
 * Two merchants on one worker with few slots: `hostile`'s endpoint answers as `reply` says, the
 * other's answers "ok". Sends `n` webhook.test to each, interleaved, and returns their delivery ids.
 */
async function twoMerchants(
  t: { teardown(fn: () => unknown): void },
  reply: () => { status: number; body: string | Buffer },
  n: number,
  prepare: (s: WebhookSetup) => Promise<unknown> = async () => undefined,
) {
  const s = await webhookSetup(t, {
    env: { WEBHOOK_CONCURRENCY: "4", WEBHOOK_RETRY_DELAYS: "0.2,0.2" },
    respond: (req) => (req.url.startsWith("/hooks/hostile") ? reply() : { status: 200, body: "ok" }),
  });
  const other = await merchantWithKey(s.app);
  const hostileEp = await s.createEndpoint("/hooks/hostile");
  const otherEp = await s.createEndpoint("/hooks/other", other);
  await prepare(s);
  const sendTest = async (creds: Credentials, endpointId: string): Promise<string> => {
    const res = await call(s.base, "POST", `/api/v1/merchants/${creds.merchant}/webhook-endpoints/${endpointId}/test`, { key: creds.key });
    if (res.status !== 200) throw new Error(`test webhook: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body.data.id;
  };
  const pairs = await Promise.all(
    Array.from({ length: n }, async () => [await sendTest(s.creds, hostileEp.id), await sendTest(other, otherEp.id)] as const),
  );
  return { s, other, hostile: pairs.map((p) => p[0]), others: pairs.map((p) => p[1]), sendOther: () => sendTest(other, otherEp.id) };
}

/** Every delivery of `ids` once all have ended (within the deadline). */
async function allEnded(s: WebhookSetup, ids: readonly string[], creds: Credentials): Promise<Json[]> {
  return until(
    `${ids.length} deliveries end`,
    async () => {
      const res = await call(s.base, "GET", `/api/v1/merchants/${creds.merchant}/webhook-deliveries?limit=200`, { key: creds.key });
      const found: Json[] = res.body.data.filter((d: Json) => ids.includes(d.id));
      return found.length === ids.length && found.every(finished) ? found : undefined;
    },
    30_000,
  );
}

t.test("a receiver answering NUL bytes and invalid UTF-8: its deliveries end, and every other merchant's are delivered", async (t) => {
  const hostileBody = Buffer.concat([Buffer.from("ok\0\0\u0007"), Buffer.from([0xff, 0xfe, 0xc3]), Buffer.alloc(4000, 0)]);
  const { s, other, hostile, others, sendOther } = await twoMerchants(t, () => ({ status: 200, body: hostileBody }), 12);

  const ended = await allEnded(s, hostile, s.creds);
  t.ok(ended.every((d) => d.status === "delivered"), "the hostile endpoint's deliveries end delivered (it answered 200)");
  const excerpts: string[] = ended.flatMap((d: Json) => d.attempts.filter((a: Json) => a.status_code === 200).map((a: Json) => String(a.response_excerpt)));
  t.ok(excerpts.length >= hostile.length, `each answer's excerpt kept (${JSON.stringify(excerpts[0]!.slice(0, 12))})`);
  t.ok(excerpts.every((e) => e.startsWith("ok\uFFFD")), "as sent, up to its first control character");
  t.notOk(excerpts.some((e) => /[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F-\u009F]/.test(e)), "without control characters");
  t.ok(excerpts.every((e) => e.length <= 1024), "and at most 1 KiB of it");

  const delivered = await allEnded(s, others, other);
  t.ok(delivered.every((d) => d.status === "delivered"), "the other merchant's deliveries of the same period are delivered");
  // The worker still pulls: a webhook sent after all that is delivered too.
  const later = await sendOther();
  t.equal((await waitForDelivery(s, later, finished, 15_000, other)).status, "delivered", "a later webhook is delivered");
  const [open] = await s.app.db.em.fork().execute<{ n: number }[]>(`select count(*)::int as n from webhook_deliveries where status = 'processing'`);
  t.equal(open!.n, 0, "nothing stays processing");
});

t.test("an attempt record the database refuses ends that delivery (unrecorded), never the batch or the worker", async (t) => {
  // Not an outage: the database is up and refuses these rows (as it refused a NUL byte).
  const refuse = (s: WebhookSetup) =>
    s.app.db.em.fork().execute(`alter table webhook_attempts add constraint refuse_poison check (response_excerpt is distinct from 'refused-by-db')`);
  const { s, other, hostile, others, sendOther } = await twoMerchants(t, () => ({ status: 503, body: "refused-by-db" }), 12, refuse);

  const ended = await allEnded(s, hostile, s.creds);
  for (const d of ended) {
    t.match(d, { status: "failed", last_error: "unrecorded" }, `${d.id} ended failed: unrecorded`);
    t.match(d.attempts.at(-1), { error: "unrecorded", outcome: "terminal", response_excerpt: null }, "its attempt says why");
  }
  const delivered = await allEnded(s, others, other);
  t.ok(delivered.every((d) => d.status === "delivered"), "the other merchant's deliveries of the same period are delivered");
  const later = await sendOther();
  t.equal((await waitForDelivery(s, later, finished, 15_000, other)).status, "delivered", "a later webhook is delivered");
});
