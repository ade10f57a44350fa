// A webhook receiver that misbehaves, then recovers: first nothing listens on its port
// (connection refused), then it answers slower than WEBHOOK_TIMEOUT_MS, then it answers 200.
// Each attempt is recorded with its classification, the retries keep to the schedule, and the
// delivery ends delivered. Real PostgreSQL, NATS and HTTPS; the app runs in this process.
import net from "node:net";
import t from "tap";
import { call } from "../helpers/harness.ts";
import { freePort } from "../helpers/processes.ts";
import { hookHost, waitForDelivery, webhookSetup } from "../helpers/webhooks.ts";

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
