// Checks in the order a payment API makes them, on REST and gRPC alike: who is calling
// (authenticate: 401), then whether they may make this call (authorize: scope, merchant,
// environment: 403), and only then what they sent (validate: 400/415). A caller who may not make
// a call learns nothing about its input. The one exception is a body over the size limit (413):
// reading it is already the cost the limit caps.
import { createClient, ConnectError, Code } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import t from "tap";
import { ErrorDetailSchema } from "../../gen/payments/v1/options_pb.ts";
import { IntentService } from "../../gen/payments/v1/payment_intents_pb.ts";
import { encodeRefusal } from "../../services/platform/deferred-refusal.ts";
import { call, idemKey, merchantWithKey, sampleIntent, startTestApp, type ApiResponse } from "../helpers/harness.ts";

const { app, base, rpcUrl } = await startTestApp(t, { BODY_LIMIT_BYTES: "4096" });
const a = await merchantWithKey(app);
const b = await merchantWithKey(app);
const readOnly = await merchantWithKey(app, "test", ["payment_intents:read"], a.merchant);
const live = await merchantWithKey(app, "live");
const intents = (m: string) => `/api/v1/merchants/${m}/payment-intents`;
const count = async () => Number((await app.db.em.fork().execute<{ n: string }[]>("select count(*) as n from payment_intents"))[0]?.n);

type Asserts = Pick<typeof t, "equal" | "ok">;

function answer(t: Asserts, res: ApiResponse, status: number, code: string, what: string): void {
  t.equal(res.status, status, `${what}: ${status}`);
  t.equal(res.body?.error?.code, code, `${what}: ${code} (${res.body?.error?.message})`);
  t.ok(res.headers.get("x-request-id"), `${what}: X-Request-Id`);
}

t.test("REST: authenticate, then authorize, then validate", async (t) => {
  const before = await count();
  const post = (key: string | undefined, body: string, headers: Record<string, string> = {}, m = a.merchant) =>
    call(base, "POST", intents(m), { key, body, idempotencyKey: idemKey(), headers: { "content-type": "application/json", ...headers } });

  answer(t, await post(undefined, "{"), 401, "unauthenticated", "no key, a broken body");
  answer(t, await post("sk_test_not_a_key_at_all_0000000000", "{"), 401, "invalid_api_key", "an unknown key, a broken body");
  answer(t, await post(undefined, "{}", { "content-type": "text/plain" }), 401, "unauthenticated", "no key, not JSON");
  const gz = await post(undefined, "\x1f\x8b", { "content-encoding": "gzip" });
  answer(t, gz, 401, "unauthenticated", "no key, a compressed body");
  t.equal(gz.headers.get("connection"), "close", "a compressed body left unread closes the connection");

  answer(t, await post(readOnly.key, "{"), 403, "insufficient_scope", "a read-only key posting a broken body");
  answer(t, await post(readOnly.key, '{"network":"ethereum","network":"bitcoin"}'), 403, "insufficient_scope", "a read-only key, a repeated key");
  answer(t, await post(readOnly.key, JSON.stringify({ ...sampleIntent, requested_amount: "-1" })), 403, "insufficient_scope", "a read-only key, an invalid amount");
  answer(t, await post(readOnly.key, "{}", { "content-type": "text/plain" }), 403, "insufficient_scope", "a read-only key, not JSON");
  answer(t, await post(b.key, "{"), 403, "merchant_mismatch", "merchant B's key on A's path, a broken body");
  const list = await call(base, "GET", `${intents(a.merchant)}?limit=abc`, { key: b.key });
  answer(t, list, 403, "merchant_mismatch", "merchant B's key on A's list, ?limit=abc");
  answer(t, await call(base, "GET", `${intents(a.merchant)}?limit=abc&limit=2`, { key: b.key }), 403, "merchant_mismatch", "a repeated query parameter");
  answer(t, await call(base, "GET", `${intents(a.merchant)}?nonsense=1`, { key: b.key }), 403, "merchant_mismatch", "an unknown query parameter");
  const sandbox = `/api/v1/sandbox/merchants/${live.merchant}/payment-intents/pi_000000000000000000000000/simulate`;
  answer(t, await call(base, "POST", sandbox, { key: live.key, body: "{", headers: { "content-type": "application/json" } }), 403, "test_mode_only", "a Live key on a Test-only route, a broken body");

  // Only a caller who may make the call hears about its input.
  answer(t, await post(a.key, "{"), 400, "invalid_json", "the merchant's own key, a broken body");
  answer(t, await post(a.key, "{}", { "content-type": "text/plain" }), 415, "unsupported_media_type", "the merchant's own key, not JSON");
  const own = await call(base, "GET", `${intents(a.merchant)}?limit=abc`, { key: a.key });
  answer(t, own, 400, "validation_failed", "the merchant's own key, ?limit=abc");
  t.equal(own.body.error.param, "limit", "naming the parameter");
  const zero = await call(base, "GET", `${intents(a.merchant)}?limit=0`, { key: a.key });
  t.equal(zero.body.error?.param, "limit", "a rule of the field (limit 1 to 200), after the same checks");

  // The exception: a body over the limit is refused before anything else.
  answer(t, await post(undefined, JSON.stringify({ pad: "x".repeat(5000) })), 413, "payload_too_large", "no key, a body over the limit");
  t.equal(await count(), before, "nothing was created");
});

t.test("gRPC: the same order", async (t) => {
  const client = createClient(IntentService, createGrpcTransport({ baseUrl: rpcUrl }));
  async function refused(what: string, run: () => Promise<unknown>, code: Code, errorCode: string, param?: string) {
    try {
      await run();
      t.fail(`${what}: succeeded`);
    } catch (err) {
      const e = ConnectError.from(err);
      t.equal(e.code, code, `${what}: ${Code[code]}`);
      const detail = e.findDetails(ErrorDetailSchema)[0];
      t.equal(detail?.code, errorCode, `${what}: ${errorCode} (${e.rawMessage})`);
      if (param !== undefined) t.equal(detail?.param, param, `${what}: param ${param}`);
    }
  }
  const bad = { merchant: a.merchant, network: "dogecoin", asset: "DOGE", requestedAmount: "-1" };
  await refused("no key, invalid fields", () => client.createPaymentIntent(bad, { headers: { "idempotency-key": idemKey() } }), Code.Unauthenticated, "unauthenticated");
  await refused(
    "a read-only key, invalid fields",
    () => client.createPaymentIntent(bad, { headers: { authorization: `Bearer ${readOnly.key}`, "idempotency-key": idemKey() } }),
    Code.PermissionDenied,
    "insufficient_scope",
  );
  await refused("merchant B's key, limit 0", () => client.listPaymentIntents({ merchant: a.merchant, limit: 0 }, { headers: { authorization: `Bearer ${b.key}` } }), Code.PermissionDenied, "merchant_mismatch");
  await refused("the merchant's own key, limit 0", () => client.listPaymentIntents({ merchant: a.merchant, limit: 0 }, { headers: { authorization: `Bearer ${a.key}` } }), Code.InvalidArgument, "validation_failed", "limit");
  await refused(
    "the merchant's own key, invalid fields",
    () => client.createPaymentIntent(bad, { headers: { authorization: `Bearer ${a.key}`, "idempotency-key": idemKey() } }),
    Code.InvalidArgument,
    "validation_failed",
    "network",
  );

  // The gateway's deferred refusal, sent by a gRPC client itself: it gets its own words back, and
  // only once it has passed the same checks.
  const spoof = { "x-gateway-refusal": encodeRefusal({ code: "invalid_json", status: 400, message: "made up", param: "network" }) };
  const good = { merchant: a.merchant, network: "ethereum", asset: "USDC", requestedAmount: "12.50" };
  await refused("a refusal header without a key", () => client.createPaymentIntent(good, { headers: { ...spoof, "idempotency-key": idemKey() } }), Code.Unauthenticated, "unauthenticated");
  await refused(
    "a refusal header with a key",
    () => client.createPaymentIntent(good, { headers: { ...spoof, authorization: `Bearer ${a.key}`, "idempotency-key": idemKey() } }),
    Code.InvalidArgument,
    "invalid_json",
  );
  await refused(
    "a refusal header that is not the gateway's",
    () => client.createPaymentIntent(good, { headers: { "x-gateway-refusal": "bm90IGpzb24", authorization: `Bearer ${a.key}`, "idempotency-key": idemKey() } }),
    Code.InvalidArgument,
    "validation_failed",
  );
  const made = await client.createPaymentIntent(good, { headers: { authorization: `Bearer ${a.key}`, "idempotency-key": idemKey() } });
  t.equal(made.data?.status, "pending", "the same call without it is taken");
});
