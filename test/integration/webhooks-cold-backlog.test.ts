// A backlog waiting for an endpoint no worker knows yet (after a worker outage, or to a new
// endpoint), drained by a freshly started worker (issue 48): none of it goes back to JetStream.
// The worker pulls far faster than the endpoint's first answers come back (here they take 1.5 s),
// so before it knows the endpoint it meets more of the backlog than it may hold: it pulls no more
// than that, and waits for the first answers, rather than sending the rest back to JetStream until
// the endpoint would be known, which made the drain's last messages come seconds late. The bench's
// cold-drain scenario measures the drain's speed; this checks the mechanism.
import t from "tap";
import { startTestApp, until } from "../helpers/harness.ts";
import { createIntents, hookHost, webhookSetup } from "../helpers/webhooks.ts";

// 4 slots, 1 for an endpoint not known yet (so the pull goes on past its messages, as with the
// default 64 and 4): the worker may hold 64 × 4 = 256 messages of endpoints not known yet, and
// the backlog is more. Fast within 5 s, so a first answer after 1.5 s makes the endpoint fast on
// any machine. Retries a minute apart: nothing here is retried.
const env = { WEBHOOK_CONCURRENCY: "4", WEBHOOK_ENDPOINT_CONCURRENCY: "1", WEBHOOK_ENDPOINT_FAST_MS: "5000", WEBHOOK_RETRY_DELAYS: "60,300" };
const backlog = 400;
const firstAnswersAfterMs = 1500;

const s = await webhookSetup(t, {
  env,
  roles: ["rpc", "gateway", "scheduler"],
  respond: (_req, n) => ({ status: 200, body: "ok", delayMs: n === 1 ? firstAnswersAfterMs : 0 }),
});

t.test(`a fresh worker drains a backlog of ${backlog} to an endpoint it does not know, sending none of it back to JetStream`, async (t) => {
  await s.createEndpoint("/cold");
  // Each intent's payment.intent.created: recorded while no worker runs.
  await createIntents(s, backlog, 20);
  t.equal(s.receiver.requests.length, 0, "nothing delivered while no worker runs");

  const worker = await startTestApp(
    t,
    { ...env, DATABASE_URL: s.databaseUrl, JETSTREAM_PREFIX: s.prefix, WEBHOOK_CONNECT_TO: `${hookHost}:443:127.0.0.1:${s.receiver.port}` },
    ["worker"],
    s.masterKey,
  );
  const delivered = () => new Set(s.receiver.requests.map((r) => (JSON.parse(r.body.toString()) as { id: string }).id));
  await until("every event of the backlog delivered", async () => delivered().size >= backlog, 120_000, () => `${delivered().size} of ${backlog}`);
  t.equal(delivered().size, backlog, "each event once at least (counted by event id)");

  const metrics = await (await fetch(`http://127.0.0.1:${worker.app.ports.ops}/metrics`)).text();
  const heldBack = /^payments_webhook_held_back_total(?:\{[^}]*\})? (\d+)/m.exec(metrics);
  t.ok(heldBack, "the worker reports what it sent back");
  t.equal(Number(heldBack?.[1]), 0, "none of the backlog went back to JetStream for want of room");
});
