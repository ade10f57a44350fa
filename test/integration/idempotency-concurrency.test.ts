// Idempotency under concurrency as a property: N identical requests sent at once under
// one Idempotency-Key, for random N and payloads, through each credential that takes a
// key (merchant API key, site credential, cashier session), create exactly one Payment
// Intent with one payment.intent.created event; every 2xx answer is the same body, the
// others are idempotency_in_progress; afterwards the same request replays and another
// one under the key is idempotency_conflict.
import assert from "node:assert/strict";
import fc from "fast-check";
import t from "tap";
import { createSiteCredential } from "../../services/site/credentials.ts";
import { createCashierSession } from "../../services/terminal/sessions.ts";
import { call, merchantWithKey, startTestApp, type ApiResponse } from "../helpers/harness.ts";

// The cashier's and the checkout's limits (public-limits.test.ts) are lifted: this is about idempotency, many creates at once.
const s = await startTestApp(t, { CHECKOUT_RATE_LIMIT_PER_MINUTE: "100000", TERMINAL_RATE_LIMIT_PER_MINUTE: "100000", TERMINAL_ADDRESS_RATE_LIMIT_PER_MINUTE: "100000" }, ["rpc", "gateway"]);
const em = () => s.app.db.em.fork();

const pairs = [
  { network: "ethereum", asset: "USDC" },
  { network: "ethereum", asset: "ETH" },
  { network: "polygon", asset: "USDC" },
  { network: "tron", asset: "USDT" },
  { network: "bitcoin", asset: "BTC" },
  { network: "solana", asset: "SOL" },
];

const payload = fc
  .record({
    pair: fc.constantFrom(...pairs),
    whole: fc.integer({ min: 0, max: 5000 }),
    fraction: fc.nat(999_999),
    reference: fc.option(fc.stringMatching(/^[A-Za-z0-9_-]{1,40}$/), { nil: undefined }),
    expires: fc.option(fc.integer({ min: 60, max: 86_400 }), { nil: undefined }),
  })
  .filter((p) => p.whole > 0 || p.fraction > 0)
  .map((p) => {
    const fraction = String(p.fraction).padStart(6, "0").replace(/0+$/, "");
    const body: Record<string, unknown> = {
      network: p.pair.network,
      asset: p.pair.asset,
      requested_amount: fraction ? `${p.whole}.${fraction}` : String(p.whole),
    };
    if (p.reference !== undefined) body.merchant_reference = p.reference;
    if (p.expires !== undefined) body.expires_in_seconds = p.expires;
    return body;
  });

/** Live intents need the merchant's own address source; the test merchants have an Ethereum one. */
function payable(environment: "test" | "live", b: Record<string, unknown>): Record<string, unknown> {
  return environment === "live" ? { ...b, network: "ethereum", asset: "USDC" } : b;
}

interface Caller {
  kind: "api_key" | "site" | "cashier";
  credential: string;
  merchant: string;
  path: string;
  /** Site and cashier requests take no metadata; merchant ones may. */
  metadata: boolean;
}

/** A fresh merchant per run, so its counts are this run's alone. */
async function freshCaller(kind: Caller["kind"], environment: "test" | "live"): Promise<Caller> {
  const c = await merchantWithKey(s.app, environment);
  if (kind === "api_key") return { kind, credential: c.key, merchant: c.merchant, path: `/api/v1/merchants/${c.merchant}/payment-intents`, metadata: true };
  if (kind === "site") {
    const site = await createSiteCredential(em(), c.merchant, environment, []);
    return { kind, credential: site.credential, merchant: c.merchant, path: "/api/v1/site-payment-intents", metadata: false };
  }
  const session = await createCashierSession(em(), { merchantId: c.merchant, environment, cashier: "Ana" });
  return { kind, credential: session.session, merchant: c.merchant, path: "/api/v1/terminal/pos/payment", metadata: false };
}

async function countsOf(merchant: string): Promise<{ intents: number; created: number; events: number }> {
  const [row] = await em().execute<{ intents: number; created: number; events: number }[]>(
    `select (select count(*)::int from payment_intents where merchant_id = ?) as intents,
            (select count(*)::int from webhook_events where merchant_id = ? and type = 'payment.intent.created') as created,
            (select count(*)::int from webhook_events where merchant_id = ?) as events`,
    [merchant, merchant, merchant],
  );
  return row!;
}

const run = fc.record({
  n: fc.integer({ min: 2, max: 16 }),
  kind: fc.constantFrom<Caller["kind"]>("api_key", "site", "cashier"),
  environment: fc.constantFrom<"test" | "live">("test", "live"),
  body: payload,
  other: payload,
  metadata: fc.dictionary(fc.stringMatching(/^[a-z]{1,8}$/), fc.stringMatching(/^[a-z0-9]{0,12}$/), { maxKeys: 3 }),
  key: fc.stringMatching(/^[A-Za-z0-9._:-]{8,64}$/),
});

t.test("N identical requests at once under one key create one intent, answered alike", async (t) => {
  let runs = 0;
  let contended = 0;
  const answered = new Set<string>();
  await fc.assert(
    fc.asyncProperty(run, async ({ n, kind, environment, body, other: otherBody, metadata, key }) => {
      let other = otherBody;
      runs++;
      const caller = await freshCaller(kind, environment);
      const sent = payable(environment, caller.metadata && Object.keys(metadata).length > 0 ? { ...body, metadata } : body);
      other = payable(environment, other);
      const send = (b: unknown): Promise<ApiResponse> => call(s.base, "POST", caller.path, { key: caller.credential, idempotencyKey: key, body: b });
      const where = `${n} × ${kind}/${environment} ${JSON.stringify(sent)}`;

      const answers = await Promise.all(Array.from({ length: n }, () => send(sent)));
      const ok = answers.filter((r) => r.status >= 200 && r.status < 300);
      const rest = answers.filter((r) => r.status < 200 || r.status >= 300);
      assert.ok(ok.length >= 1, `${where}: at least one success: ${JSON.stringify(answers.map((r) => r.body))}`);
      for (const r of ok) assert.deepEqual(r.body, ok[0]!.body, `${where}: every success is the same body`);
      assert.equal(ok.filter((r) => r.headers.get("idempotent-replayed") !== "true").length, 1, `${where}: one original, the other successes replays`);
      for (const r of rest) {
        assert.equal(r.status, 409, `${where}: ${JSON.stringify(r.body)}`);
        assert.equal(r.body.error?.code, "idempotency_in_progress", where);
        assert.equal(r.body.error?.request_id, r.headers.get("x-request-id"), where);
      }
      if (rest.length > 0) contended++;
      answered.add(`${ok.length}/${rest.length}`);
      const id: string = ok[0]!.body.data.public_id;
      assert.deepEqual(await countsOf(caller.merchant), { intents: 1, created: 1, events: 1 }, `${where}: one intent, one payment.intent.created`);
      const [event] = await em().execute<{ payment_intent_id: string }[]>(`select payment_intent_id from webhook_events where merchant_id = ?`, [caller.merchant]);
      assert.equal(event?.payment_intent_id, id, `${where}: the event is the answered intent's`);

      const replay = await send(sent);
      assert.equal(replay.status, 200, where);
      assert.equal(replay.headers.get("idempotent-replayed"), "true", where);
      assert.deepEqual(replay.body, ok[0]!.body, `${where}: a later repeat replays the same body`);

      const differs = JSON.stringify(other) !== JSON.stringify(sent);
      if (differs) {
        const conflicts = await Promise.all(Array.from({ length: Math.min(n, 4) }, () => send(other)));
        for (const c of conflicts) {
          assert.equal(c.status, 409, `${where}: another body under the key: ${JSON.stringify(c.body)}`);
          assert.equal(c.body.error?.code, "idempotency_conflict", where);
        }
      }
      assert.deepEqual(await countsOf(caller.merchant), { intents: 1, created: 1, events: 1 }, `${where}: still one intent`);
    }),
    { numRuns: Number(process.env.IDEMPOTENCY_RUNS ?? 30) },
  );
  t.pass(`${runs} runs, ${contended} with requests still in progress; successes/in-progress seen: ${[...answered].sort().join(", ")}`);
});

t.test("the same key under two merchants or environments is two requests", async (t) => {
  await fc.assert(
    fc.asyncProperty(payload, fc.stringMatching(/^[A-Za-z0-9]{8,32}$/), async (body, key) => {
      const a = await freshCaller("api_key", "test");
      const aLive = await merchantWithKey(s.app, "live", undefined, a.merchant);
      const b = await freshCaller("api_key", "test");
      const answers = await Promise.all(
        [
          [a.path, a.credential],
          [a.path, aLive.key],
          [b.path, b.credential],
        ].map(([path, credential]) => call(s.base, "POST", path!, { key: credential, idempotencyKey: key, body: payable("live", body) })),
      );
      for (const r of answers) assert.equal(r.status, 200, JSON.stringify(r.body));
      assert.equal(new Set(answers.map((r) => r.body.data.public_id)).size, 3, "three intents");
      assert.deepEqual(
        answers.map((r) => r.body.data.environment),
        ["test", "live", "test"],
      );
      assert.ok(answers.every((r) => r.headers.get("idempotent-replayed") === null), "none is a replay of another's");
    }),
    { numRuns: 10 },
  );
  t.pass("keys are scoped by merchant and environment");
});
