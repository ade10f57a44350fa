// No merchant's endpoints can hold up another merchant's webhooks (issue 36): merchant A floods
// endpoints that hang (or answer 500 at once) with a backlog of deliveries, and merchant B's
// webhook.test, sent right after, still reaches B's receiver within 2 s. And a worker stopped
// mid-batch leaves no delivery unaccounted: an attempt it gave up on is recorded (worker_lost),
// and another worker delivers it. Real receiver, real PostgreSQL and NATS, through REST.
//
// Kept light, so that tests beside it in the same tap run keep their timing: a worker of 16 slots
// (WEBHOOK_CONCURRENCY) with a cap of 2 per endpoint, 4 endpoints of A and 120 deliveries. That
// is still the defect where workers take messages first come, first served: A's hanging attempts
// (2 s each) fill the 16 slots, so B's message, behind 120 of A's, waits about 120 / 16 × 2 s = 15 s.
import { createHmac } from "node:crypto";
import pg from "pg";
import t from "tap";
import { call, idemKey, merchantWithKey, startTestApp, until, type Credentials } from "../helpers/harness.ts";
import type { Reply } from "../helpers/receiver.ts";
import { createIntents, finished, hookHost, webhookSetup, type WebhookSetup } from "../helpers/webhooks.ts";

type Test = Pick<typeof t, "equal" | "ok" | "teardown">;

// The attempt timeout (WEBHOOK_TIMEOUT_MS), the worker's slots and the cap per endpoint; retries
// 5 s apart (not the harness's 0.2 s), so that what B meets is A's backlog, not A's retries
// coming due five times a second.
const timeoutMs = 2000;
const env = { WEBHOOK_TIMEOUT_MS: String(timeoutMs), WEBHOOK_CONCURRENCY: "16", WEBHOOK_ENDPOINT_CONCURRENCY: "2", WEBHOOK_RETRY_DELAYS: "5,5,5,5,5" };
const endpointsOfA = 4;
const intentsOfA = 30;

/** A's endpoints at /a/1…, B's at /b; A's answer as `reply` says, B's 200 at once. */
async function floodSetup(t: Test, reply: Reply): Promise<{ s: WebhookSetup; b: Credentials; bEndpoint: { id: string; secret: string } }> {
  const s = await webhookSetup(t, {
    env,
    respond: (req) => (req.url.startsWith("/a/") ? reply : { status: 200, body: "ok" }),
  });
  for (let i = 1; i <= endpointsOfA; i++) await s.createEndpoint(`/a/${i}`);
  const b = await merchantWithKey(s.app);
  const bEndpoint = await s.createEndpoint("/b", b);
  return { s, b, bEndpoint };
}

async function bTestArrivesWithin2s(t: Test, reply: Reply) {
  const { s, b, bEndpoint } = await floodSetup(t, reply);
  await createIntents(s, intentsOfA);
  // The flood has begun: A's attempts are reaching its receiver.
  await until("A's first attempts arrive", async () => s.receiver.requests.filter((r) => r.url.startsWith("/a/")).length >= endpointsOfA, 20_000);

  const sentAt = Date.now();
  const res = await call(s.base, "POST", `/api/v1/merchants/${b.merchant}/webhook-endpoints/${bEndpoint.id}/test`, { key: b.key, idempotencyKey: idemKey() });
  t.equal(res.status, 200, "B's webhook.test is accepted");
  const got = await until("B's webhook.test reaches B's receiver", async () => s.receiver.requests.find((r) => r.url === "/b"), 15_000);
  const lateMs = got.at - sentAt;
  t.ok(lateMs <= 2000, `B's webhook.test reached B within 2 s of being sent (${lateMs} ms, with ${s.receiver.requests.length - 1} of A's attempts seen)`);
  const signed = createHmac("sha256", bEndpoint.secret).update(`${got.headers["x-service-timestamp"]}.`).update(got.body).digest("hex");
  t.equal(got.headers["x-service-signature"], signed, "signed with B's secret");
  t.equal(JSON.parse(got.body.toString()).type, "webhook.test", "it is B's webhook.test");
  const deliveriesOfA = await s.app.db.em.fork().execute<{ n: number }[]>(
    `select count(*)::int as n from webhook_deliveries d join webhook_endpoints e on e.id = d.endpoint_id where e.merchant_id = ?`,
    [s.creds.merchant],
  );
  t.equal(deliveriesOfA[0]?.n, endpointsOfA * intentsOfA, `A has ${endpointsOfA * intentsOfA} deliveries (the flood)`);
}

t.test(`A's ${endpointsOfA} endpoints hang past the attempt timeout with ${endpointsOfA * intentsOfA} deliveries: B's webhook.test reaches B within 2 s`, (t) =>
  bTestArrivesWithin2s(t, { status: 200, body: "late", delayMs: timeoutMs + 1000 }),
);

t.test(`A's ${endpointsOfA} endpoints answer 500 at once with ${endpointsOfA * intentsOfA} deliveries: B's webhook.test reaches B within 2 s`, (t) =>
  bTestArrivesWithin2s(t, { status: 500, body: "down" }),
);

t.test("a worker stopped mid-batch leaves no delivery unaccounted, and another worker delivers them all", async (t) => {
  let answering = false;
  // Attempts outlive the stop: the receiver holds them until the test lets it answer.
  const s = await webhookSetup(t, {
    env: { WEBHOOK_TIMEOUT_MS: "60000" },
    respond: () => (answering ? { status: 200, body: "ok" } : { status: 200, hang: true }),
  });
  await s.createEndpoint();
  await s.createEndpoint();
  await createIntents(s, 10);
  await until("attempts are in flight", async () => s.receiver.requests.length >= 4, 20_000);

  await s.app.stop();
  const db = new pg.Client({ connectionString: s.databaseUrl });
  await db.connect();
  t.teardown(() => db.end());
  const { rows } = await db.query<{ id: string; status: string; attempt_count: number; recorded: number; lost: number }>(
    `select d.id, d.status, d.attempt_count, count(a.*)::int as recorded, count(a.*) filter (where a.error = 'worker_lost')::int as lost
       from webhook_deliveries d left join webhook_attempts a on a.delivery_id = d.id group by d.id, d.created_at order by d.id`,
  );
  t.equal(rows.length, 20, "20 deliveries");
  t.same(rows.filter((r) => r.status === "processing"), [], "no delivery is left processing by the stopped worker");
  t.same(rows.filter((r) => r.recorded !== r.attempt_count), [], "every attempt counted is recorded");
  const lost = rows.filter((r) => r.lost > 0);
  t.ok(lost.length >= 4, `the attempts in flight at the stop are recorded as worker_lost (${lost.length})`);
  t.same(lost.filter((r) => r.status !== "pending"), [], "the deliveries given up on are pending again, with attempts left");

  // Another worker takes them over and delivers every one.
  answering = true;
  const next = await startTestApp(t, {
    DATABASE_URL: s.databaseUrl,
    JETSTREAM_PREFIX: s.prefix,
    WEBHOOK_CONNECT_TO: `${hookHost}:443:127.0.0.1:${s.receiver.port}`,
    WEBHOOK_RETRY_DELAYS: "0.2,0.2,0.2,0.2,0.2",
    WEBHOOK_TIMEOUT_MS: "2000",
  }, ["worker", "rpc", "gateway"], s.masterKey);
  let last = "";
  await until(
    "every delivery is delivered by the next worker",
    async () => {
      const res = await call(next.base, "GET", `/api/v1/merchants/${s.creds.merchant}/webhook-deliveries?limit=200`, { key: s.creds.key });
      // eslint-disable-next-line @typescript-eslint/no-explicit-any
      const ds: any[] = res.body.data;
      last = JSON.stringify(ds.map((d) => d.status));
      return ds.length === 20 && ds.every(finished) && ds.every((d) => d.status === "delivered");
    },
    30_000,
    () => last,
  );
  t.pass("all 20 deliveries delivered after the stop");
});
