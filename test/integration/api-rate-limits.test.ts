// Every merchant route is limited per API key, REST and gRPC alike, with separate read and write
// budgets (token buckets). The budgets here are small and refill slowly (10 calls an hour, one
// every 360 s), so a burst's counts are the same however fast the machine runs it: the test asserts
// on how many calls were served and refused, never on timings. The default (100 a second, the
// 101st in a second refused) is the unit test's, on a clock of its own.
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import t, { type Test } from "tap";
import { ErrorDetailSchema } from "../../gen/payments/v1/options_pb.ts";
import { IntentService } from "../../gen/payments/v1/payment_intents_pb.ts";
import { call, idemKey, merchantWithKey, sampleIntent, startTestApp, type ApiResponse } from "../helpers/harness.ts";

const budget = 10;
const s = await startTestApp(t, { API_READ_RATE_LIMIT: String(budget), API_WRITE_RATE_LIMIT: String(budget), API_RATE_LIMIT_SECONDS: "3600" }, ["rpc", "gateway"]);
const sessions = new Http2SessionManager(s.rpcUrl);
t.teardown(() => sessions.abort());
const grpc = createClient(IntentService, createGrpcTransport({ baseUrl: s.rpcUrl, sessionManager: sessions }));

const create = (merchant: string, key: string) => call(s.base, "POST", `/api/v1/merchants/${merchant}/payment-intents`, { key, idempotencyKey: idemKey(), body: sampleIntent });
const list = (merchant: string, key: string) => call(s.base, "GET", `/api/v1/merchants/${merchant}/payment-intents?limit=1`, { key });
const grpcCreate = (merchant: string, key: string) =>
  grpc
    .createPaymentIntent({ merchant, network: "ethereum", asset: "USDC", requestedAmount: "12.50" }, { headers: { authorization: `Bearer ${key}`, "idempotency-key": idemKey() } })
    .then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
const intentsOf = async (merchant: string) =>
  (await s.app.db.em.fork().execute<{ n: number }[]>(`select count(*)::int as n from payment_intents where merchant_id = ?`, [merchant]))[0]?.n;

function checkRefusal(t: Test, res: ApiResponse, what: string): void {
  t.equal(res.status, 429, what);
  t.equal(res.body.error.code, "rate_limited", `${what}: rate_limited in the error envelope`);
  t.match(res.body.error.request_id, /^req_/);
  // One call refills every 360 s: the wait is whole seconds, at most that.
  const retryAfter = Number(res.headers.get("retry-after"));
  t.ok(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 360, `${what}: Retry-After in whole seconds (${res.headers.get("retry-after")})`);
}

t.test("a burst of writes with one key: the budget is served, the rest is 429 with Retry-After, and another key is unaffected", async (t) => {
  const a = await merchantWithKey(s.app);
  const other = await merchantWithKey(s.app, "test", undefined, a.merchant);
  const answers = await Promise.all(Array.from({ length: budget + 3 }, () => create(a.merchant, a.key)));
  t.equal(answers.filter((r) => r.status === 200).length, budget, `${budget} creates served`);
  const refused = answers.filter((r) => r.status !== 200);
  t.equal(refused.length, 3, "the 3 beyond the budget refused");
  for (const r of refused) checkRefusal(t, r, "a write over the budget");
  t.equal(await intentsOf(a.merchant), budget, "the refused creates created nothing");

  t.equal((await create(a.merchant, other.key)).status, 200, "another key of the same merchant still writes");
  t.equal((await list(a.merchant, a.key)).status, 200, "reads have their own budget: the key still reads");

  const overGrpc = await grpcCreate(a.merchant, a.key);
  t.equal(overGrpc?.code, Code.ResourceExhausted, "the same key over gRPC is refused too: one budget across transports");
  t.same(overGrpc?.findDetails(ErrorDetailSchema).map((d) => d.code), ["rate_limited"]);
  t.match(overGrpc?.metadata.get("retry-after") ?? "", /^[1-9][0-9]*$/, "with a retry-after in whole seconds");
  t.equal(await intentsOf(a.merchant), budget + 1, "nothing more was created");
});

t.test("over gRPC: the burst beyond the budget is ResourceExhausted, and REST then shares the empty bucket", async (t) => {
  const b = await merchantWithKey(s.app);
  const errors = await Promise.all(Array.from({ length: budget + 2 }, () => grpcCreate(b.merchant, b.key)));
  t.equal(errors.filter((e) => e === undefined).length, budget, `${budget} gRPC creates served`);
  const refused = errors.filter((e) => e !== undefined);
  t.equal(refused.length, 2);
  for (const e of refused) {
    t.equal(e?.code, Code.ResourceExhausted);
    t.same(e?.findDetails(ErrorDetailSchema).map((d) => d.code), ["rate_limited"]);
    t.match(e?.metadata.get("retry-after") ?? "", /^[1-9][0-9]*$/);
  }
  checkRefusal(t, await create(b.merchant, b.key), "a REST write after the gRPC burst");
  t.equal(await intentsOf(b.merchant), budget);
});

t.test("reads have a budget of their own, on every merchant route", async (t) => {
  const c = await merchantWithKey(s.app);
  const reads = [
    `/api/v1/merchants/${c.merchant}/payment-intents`,
    `/api/v1/merchants/${c.merchant}/webhook-endpoints`,
    `/api/v1/merchants/${c.merchant}/webhook-deliveries`,
    `/api/v1/merchants/${c.merchant}/go-live/readiness`,
    `/api/v1/merchants/${c.merchant}/payment-intents/pi_unknown`,
  ];
  const answers = await Promise.all(Array.from({ length: budget + 2 }, (_, i) => call(s.base, "GET", reads[i % reads.length] as string, { key: c.key })));
  t.equal(answers.filter((r) => r.status !== 429).length, budget, `${budget} reads served (whatever their answer)`);
  for (const r of answers.filter((r) => r.status === 429)) checkRefusal(t, r, "a read over the budget");
  t.equal((await create(c.merchant, c.key)).status, 200, "the key's writes are not touched by its reads");
  // Writes of every kind take from the write budget: the webhook routes and the sandbox too.
  const writes = await Promise.all([
    call(s.base, "POST", `/api/v1/merchants/${c.merchant}/webhook-endpoints/we_unknown/disable`, { key: c.key }),
    call(s.base, "POST", `/api/v1/merchants/${c.merchant}/webhook-endpoints/we_unknown/test`, { key: c.key }),
    call(s.base, "POST", `/api/v1/merchants/${c.merchant}/payment-intents/pi_unknown/cancel`, { key: c.key }),
    call(s.base, "POST", `/api/v1/sandbox/merchants/${c.merchant}/payment-intents/pi_unknown/simulate`, { key: c.key, body: { outcome: "confirmed" } }),
    ...Array.from({ length: budget }, () => call(s.base, "POST", `/api/v1/merchants/${c.merchant}/webhook-deliveries/wd_unknown/replay`, { key: c.key, idempotencyKey: idemKey() })),
  ]);
  t.equal(writes.filter((r) => r.status !== 429).length, budget - 1, "the write budget (less the create) served, whatever the route");
  t.equal(writes.filter((r) => r.status === 429).length, 5);
});
