// Payment Intents through the REST gateway, against the real PostgreSQL.
import t from "tap";
import { revokeApiKey } from "../../services/auth/admin.ts";
import { settleCredentialChanges } from "../../services/auth/credential-cache.ts";
import { call, idemKey, merchantWithKey, sampleIntent, startTestApp } from "../helpers/harness.ts";

const { app, base, databaseUrl } = await startTestApp(t);
const a = await merchantWithKey(app);
const b = await merchantWithKey(app);
const intents = (c: { merchant: string }) => `/api/v1/merchants/${c.merchant}/payment-intents`;

async function countIntents(): Promise<number> {
  const rows = await app.db.em.fork().execute<{ n: string }[]>("select count(*)::text as n from payment_intents");
  return Number(rows[0]?.n);
}

t.test("create returns the intent in the data envelope and records payment.intent.created", async (t) => {
  const res = await call(base, "POST", intents(a), {
    key: a.key,
    idempotencyKey: idemKey(),
    body: { ...sampleIntent, merchant_reference: "order-1", expires_in_seconds: 120, metadata: { cart: "42" } },
  });
  t.equal(res.status, 200);
  t.match(res.headers.get("x-request-id"), /^req_/);
  const pi = res.body.data;
  t.match(pi.public_id, /^pi_[0-9A-Za-z]{24}$/);
  t.same(
    { ...pi, public_id: undefined, created_at: undefined, expires_at: undefined, checkout_url: undefined, deposit_address: undefined, payment_uri: undefined },
    {
      public_id: undefined,
      status: "pending",
      merchant_reference: "order-1",
      network: "ethereum",
      asset: "USDC",
      requested_amount: "12.50",
      environment: "test",
      created_at: undefined,
      expires_at: undefined,
      checkout_url: undefined,
      metadata: { cart: "42" },
      deposit_address: undefined,
      payment_uri: undefined,
      amount_received: null,
      amount_refunded: null,
      amount_pending: null,
      transactions: [],
      paid_at: null,
      expired_at: null,
      cancelled_at: null,
      source: "api",
      cashier: null,
      terminal: null,
      required_confirmations: 12,
      underpayment_tolerance_bps: 0,
      sequence: 1,
      redirect_url: null,
      cancel_url: null,
      watched: true,
      notice: null,
      amount_due: "12.5",
      price_amount: null,
      price_currency: null,
      quote: null,
      payment_methods: [
        {
          network: "ethereum",
          asset: "USDC",
          requested_amount: "12.50",
          amount_due: "12.5",
          deposit_address: pi.deposit_address,
          payment_uri: pi.payment_uri,
          quote: null,
          chosen: true,
          required_confirmations: 12,
        },
      ],
    },
  );
  // A Test intent's address comes from the built-in Test key (EIP-55), and its EIP-681 URI pays it.
  t.match(pi.deposit_address, /^0x[0-9a-fA-F]{40}$/);
  t.equal(pi.payment_uri, `ethereum:0x1c7D4B196Cb0C7B01d743Fbc6116a902379C7238@11155111/transfer?address=${pi.deposit_address}&uint256=12500000`);
  t.equal(pi.checkout_url, `https://checkout.example.test/${pi.public_id}`);
  t.equal(Date.parse(pi.expires_at) - Date.parse(pi.created_at), 120_000);

  const got = await call(base, "GET", `${intents(a)}/${pi.public_id}`, { key: a.key });
  t.equal(got.status, 200);
  t.same(got.body.data, pi, "GET returns what create returned");

  const events = await app.db.em
    .fork()
    .execute<{ id: string; type: string; payload: string }[]>("select id, type, payload from webhook_events where payment_intent_id = ?", [pi.public_id]);
  t.equal(events.length, 1);
  t.equal(events[0]?.type, "payment.intent.created");
  const envelope = JSON.parse(events[0]?.payload ?? "{}");
  t.same(Object.keys(envelope).sort(), ["created_at", "data", "id", "type"]);
  t.same(envelope.data.payment_intent, pi, "the event embeds the intent as the API shows it");

  const ev = await call(base, "GET", `/api/v1/merchants/${a.merchant}/webhook-events/${events[0]?.id}`, { key: a.key });
  t.equal(ev.status, 200);
  t.same(ev.body.data, envelope, "GET webhook-events returns the envelope as recorded");
  const foreign = await call(base, "GET", `/api/v1/merchants/${b.merchant}/webhook-events/${events[0]?.id}`, { key: b.key });
  t.equal(foreign.status, 404, "another merchant cannot read the event");
});

t.test("defaults: expires in 900 s, no reference is null, metadata empty", async (t) => {
  const res = await call(base, "POST", intents(a), { key: a.key, idempotencyKey: idemKey(), body: sampleIntent });
  t.equal(res.status, 200);
  t.equal(res.body.data.merchant_reference, null);
  t.same(res.body.data.metadata, {});
  t.equal(Date.parse(res.body.data.expires_at) - Date.parse(res.body.data.created_at), 900_000);
});

t.test("redirect_url and cancel_url: kept as given, shown on reads and in the event, never checked for where they point", async (t) => {
  const urls = {
    redirect_url: "https://shop.example/orders/1001/thanks?from=checkout",
    // Only the shopper's browser follows these: a private address is the shop's business, not refused as a webhook URL would be.
    cancel_url: "https://10.0.0.5:443/cart",
  };
  const res = await call(base, "POST", intents(a), { key: a.key, idempotencyKey: idemKey(), body: { ...sampleIntent, ...urls } });
  t.equal(res.status, 200, JSON.stringify(res.body));
  t.match(res.body.data, urls, "in the create response");
  const got = await call(base, "GET", `${intents(a)}/${res.body.data.public_id}`, { key: a.key });
  t.match(got.body.data, urls, "on a read");
  const listed = await call(base, "GET", `${intents(a)}?public_id=${res.body.data.public_id}`, { key: a.key });
  t.match(listed.body.data, [urls], "in the list");
  const events = await app.db.em.fork().execute<{ payload: string }[]>("select payload from webhook_events where payment_intent_id = ?", [res.body.data.public_id]);
  t.match(JSON.parse(events[0]?.payload ?? "{}").data.payment_intent, urls, "in payment.intent.created");
});

t.test("idempotency", async (t) => {
  const key = idemKey();
  const first = await call(base, "POST", intents(a), { key: a.key, idempotencyKey: key, body: sampleIntent });
  t.equal(first.status, 200);
  t.equal(first.headers.get("idempotent-replayed"), null);
  const before = await countIntents();

  const again = await call(base, "POST", intents(a), { key: a.key, idempotencyKey: `  ${key} `, body: { ...sampleIntent } });
  t.equal(again.status, 200, "the same request (key trimmed) replays");
  t.equal(again.headers.get("idempotent-replayed"), "true");
  t.same(again.body, first.body, "same body");

  const other = await call(base, "POST", intents(a), { key: a.key, idempotencyKey: key, body: { ...sampleIntent, requested_amount: "13" } });
  t.equal(other.status, 409);
  t.equal(other.body.error.code, "idempotency_conflict");

  const otherMerchant = await call(base, "POST", intents(b), { key: b.key, idempotencyKey: key, body: sampleIntent });
  t.equal(otherMerchant.status, 200, "keys are scoped by merchant");
  t.not(otherMerchant.body.data.public_id, first.body.data.public_id);
  t.equal(await countIntents(), before + 1);

  const missing = await call(base, "POST", intents(a), { key: a.key, body: sampleIntent });
  t.equal(missing.status, 400);
  t.equal(missing.body.error.code, "idempotency_key_required");
  for (const bad of ["short", "x".repeat(129), "has space inside", "slash/key-123"]) {
    const res = await call(base, "POST", intents(a), { key: a.key, idempotencyKey: bad, body: sampleIntent });
    t.equal(res.body.error?.code, "invalid_idempotency_key", JSON.stringify(bad));
  }
  t.equal(await countIntents(), before + 1, "refused requests stored nothing");
});

t.test("a failed request does not burn its key", async (t) => {
  const key = idemKey();
  const bad = await call(base, "POST", intents(a), { key: a.key, idempotencyKey: key, body: { ...sampleIntent, requested_amount: "-1" } });
  t.equal(bad.status, 400);
  const good = await call(base, "POST", intents(a), { key: a.key, idempotencyKey: key, body: sampleIntent });
  t.equal(good.status, 200);
});

t.test("concurrent duplicates create one intent", async (t) => {
  const key = idemKey();
  const before = await countIntents();
  const results = await Promise.all(
    Array.from({ length: 8 }, () => call(base, "POST", intents(a), { key: a.key, idempotencyKey: key, body: sampleIntent })),
  );
  t.equal(await countIntents(), before + 1, "exactly one intent");
  const ok = results.filter((r) => r.status === 200);
  t.ok(ok.length >= 1);
  t.equal(new Set(ok.map((r) => r.body.data.public_id)).size, 1, "every success is the same intent");
  for (const r of results.filter((r) => r.status !== 200)) t.equal(r.body.error.code, "idempotency_in_progress");
});

t.test("bad input: 4xx with param, nothing stored", async (t) => {
  const before = await countIntents();
  const cases: [string, unknown, string][] = [
    ["unknown field", { ...sampleIntent, colour: "red" }, "colour"],
    ["wrong type amount", { ...sampleIntent, requested_amount: 12.5 }, "requested_amount"],
    ["exponent", { ...sampleIntent, requested_amount: "1e3" }, "requested_amount"],
    ["negative", { ...sampleIntent, requested_amount: "-1" }, "requested_amount"],
    ["zero", { ...sampleIntent, requested_amount: "0" }, "requested_amount"],
    ["leading zero", { ...sampleIntent, requested_amount: "01.5" }, "requested_amount"],
    ["too many decimals", { ...sampleIntent, requested_amount: "1.1234567" }, "requested_amount"],
    ["beyond what the asset can be", { ...sampleIntent, requested_amount: "99999999999999999999999999999999999999.00" }, "requested_amount"],
    ["unsupported pair", { ...sampleIntent, network: "bitcoin", asset: "USDC" }, "asset"],
    ["unknown network", { ...sampleIntent, network: "dogechain" }, "network"],
    ["missing amount", { network: "ethereum", asset: "USDC" }, "requested_amount"],
    ["long reference", { ...sampleIntent, merchant_reference: "r".repeat(129) }, "merchant_reference"],
    ["expiry too short", { ...sampleIntent, expires_in_seconds: 59 }, "expires_in_seconds"],
    ["expiry too long", { ...sampleIntent, expires_in_seconds: 86_401 }, "expires_in_seconds"],
    ["expiry as string", { ...sampleIntent, expires_in_seconds: "900" }, "expires_in_seconds"],
    ["too much metadata", { ...sampleIntent, metadata: Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`k${i}`, "v"])) }, "metadata"],
    ["metadata not strings", { ...sampleIntent, metadata: { a: 1 } }, "metadata"],
    ["path field in body", { ...sampleIntent, merchant: b.merchant }, "merchant"],
    ["redirect_url over http", { ...sampleIntent, redirect_url: "http://shop.example/thanks" }, "redirect_url"],
    ["redirect_url relative", { ...sampleIntent, redirect_url: "/thanks" }, "redirect_url"],
    ["redirect_url javascript:", { ...sampleIntent, redirect_url: "javascript:alert(1)" }, "redirect_url"],
    ["redirect_url with a password", { ...sampleIntent, redirect_url: "https://user:pw@shop.example/" }, "redirect_url"],
    ["redirect_url on another port", { ...sampleIntent, redirect_url: "https://shop.example:8443/thanks" }, "redirect_url"],
    ["redirect_url empty", { ...sampleIntent, redirect_url: "" }, "redirect_url"],
    ["redirect_url too long", { ...sampleIntent, redirect_url: `https://shop.example/${"p".repeat(2030)}` }, "redirect_url"],
    ["redirect_url not a string", { ...sampleIntent, redirect_url: 42 }, "redirect_url"],
    ["cancel_url with a space", { ...sampleIntent, cancel_url: "https://shop.example/my cart" }, "cancel_url"],
  ];
  for (const [name, body, param] of cases) {
    const res = await call(base, "POST", intents(a), { key: a.key, idempotencyKey: idemKey(), body });
    t.equal(res.status, 400, name);
    t.equal(res.body.error?.code, "validation_failed", name);
    t.equal(res.body.error?.param, param, name);
    t.match(res.body.error?.request_id, /^req_/, name);
  }
  const raw: [string, string | Buffer, number, string][] = [
    ["array body", "[]", 400, "invalid_json"],
    ["scalar body", "42", 400, "invalid_json"],
    ["null body", "null", 400, "invalid_json"],
    ["broken JSON", '{"network":', 400, "invalid_json"],
    ["invalid UTF-8", Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d]), 400, "invalid_json"],
    ["2 MB body", JSON.stringify({ ...sampleIntent, merchant_reference: "x".repeat(2 * 1024 * 1024) }), 413, "payload_too_large"],
  ];
  for (const [name, body, status, code] of raw) {
    const res = await call(base, "POST", intents(a), { key: a.key, idempotencyKey: idemKey(), body });
    t.equal(res.status, status, name);
    t.equal(res.body.error?.code, code, name);
  }
  const noType = await call(base, "POST", intents(a), {
    key: a.key,
    idempotencyKey: idemKey(),
    body: JSON.stringify(sampleIntent),
    headers: { "content-type": "text/plain" },
  });
  t.equal(noType.status, 415);
  t.equal(noType.body.error.code, "unsupported_media_type");
  t.equal(await countIntents(), before, "nothing was stored");
});

t.test("authentication and authorization", async (t) => {
  const path = intents(a);
  const missing = await call(base, "GET", path);
  t.equal(missing.status, 401);
  t.equal(missing.body.error.code, "unauthenticated");
  const malformed = await call(base, "GET", path, { headers: { authorization: "Bearer a, b" } });
  t.equal(malformed.body.error.code, "unauthenticated");
  // Stripe's `curl -u "$KEY:"`: refused, with the way that works, and the key is not echoed.
  const basic = await call(base, "GET", path, { headers: { authorization: `Basic ${Buffer.from(`${a.key}:`).toString("base64")}` } });
  t.equal(basic.status, 401, "HTTP Basic with the key as user name");
  t.equal(basic.body.error.code, "unauthenticated");
  t.match(basic.body.error.message, /^HTTP Basic \(curl -u\) is not accepted, .*Authorization: Bearer <credential>\.$/, "says why and what to send");
  t.notMatch(JSON.stringify(basic.body), a.key.slice(8, 20), "the key is not echoed");
  t.notMatch(JSON.stringify(basic.body), Buffer.from(`${a.key}:`).toString("base64").slice(0, 16), "nor its Basic form");
  const unknown = await call(base, "GET", path, { key: "sk_test_" + "A".repeat(32) });
  t.equal(unknown.status, 401);
  t.equal(unknown.body.error.code, "invalid_api_key");
  t.notMatch(JSON.stringify(unknown.body), "AAAAAAAA", "the key is not echoed");

  const readOnly = await merchantWithKey(app, "test", ["payment_intents:read"], a.merchant);
  const denied = await call(base, "POST", path, { key: readOnly.key, idempotencyKey: idemKey(), body: sampleIntent });
  t.equal(denied.status, 403);
  t.equal(denied.body.error.code, "insufficient_scope");
  t.equal((await call(base, "GET", path, { key: readOnly.key })).status, 200);

  const mismatch = await call(base, "GET", intents(b), { key: a.key });
  t.equal(mismatch.status, 403);
  t.equal(mismatch.body.error.code, "merchant_mismatch");

  const revoked = await merchantWithKey(app, "test", ["payment_intents:read"], a.merchant);
  await revokeApiKey(app.db.em.fork(), revoked.keyId);
  await settleCredentialChanges(databaseUrl); // as the CLI does before it returns
  const afterRevoke = await call(base, "GET", path, { key: revoked.key });
  t.equal(afterRevoke.status, 401);
  t.equal(afterRevoke.body.error.code, "invalid_api_key");
});

t.test("environments are separate: a Live key does not see Test objects", async (t) => {
  const live = await merchantWithKey(app, "live", ["payment_intents:read", "payment_intents:write"], a.merchant);
  const created = await call(base, "POST", intents(a), { key: a.key, idempotencyKey: idemKey(), body: sampleIntent });
  const id = created.body.data.public_id;
  const read = await call(base, "GET", `${intents(a)}/${id}`, { key: live.key });
  t.equal(read.status, 404);
  t.equal(read.body.error.code, "not_found");
  const list = await call(base, "GET", intents(a), { key: live.key });
  t.equal(list.body.data.length, 0, "the Live list is empty");
  const liveCreated = await call(base, "POST", intents(a), { key: live.key, idempotencyKey: created.headers.get("x-request-id") ?? idemKey(), body: sampleIntent });
  t.equal(liveCreated.body.data.environment, "live", "environment comes from the key");
  const body = await call(base, "POST", intents(a), { key: live.key, idempotencyKey: idemKey(), body: { ...sampleIntent, environment: "test" } });
  t.equal(body.status, 400, "a body cannot choose the environment");
});

t.test("cancel", async (t) => {
  const created = await call(base, "POST", intents(a), { key: a.key, idempotencyKey: idemKey(), body: sampleIntent });
  const id = created.body.data.public_id;
  const cancelled = await call(base, "POST", `${intents(a)}/${id}/cancel`, { key: a.key });
  t.equal(cancelled.status, 200);
  t.equal(cancelled.body.data.status, "cancelled");
  const again = await call(base, "POST", `${intents(a)}/${id}/cancel`, { key: a.key });
  t.equal(again.status, 409);
  t.equal(again.body.error.code, "invalid_state");
  const types = await app.db.em
    .fork()
    .execute<{ type: string }[]>("select type from webhook_events where payment_intent_id = ? order by created_at, type desc", [id]);
  t.same(types.map((r) => r.type), ["payment.intent.created", "payment.cancelled"]);
  const other = await call(base, "POST", `${intents(b)}/${id}/cancel`, { key: b.key });
  t.equal(other.status, 404, "another merchant's intent is not found");
  const unknown = await call(base, "POST", `${intents(a)}/pi_doesnotexist/cancel`, { key: a.key });
  t.equal(unknown.status, 404);
});

t.test("gateway: unknown route, wrong method, request id", async (t) => {
  const nf = await call(base, "GET", "/api/v1/nothing-here", { key: a.key });
  t.equal(nf.status, 404);
  t.equal(nf.body.error.code, "route_not_found");
  t.match(nf.headers.get("x-request-id"), /^req_/);
  const wrong = await call(base, "DELETE", intents(a), { key: a.key });
  t.equal(wrong.status, 405);
  t.equal(wrong.body.error.code, "method_not_allowed");
  t.equal(wrong.headers.get("allow"), "GET, POST");
  t.equal(nf.body.error.request_id, nf.headers.get("x-request-id"));
});
