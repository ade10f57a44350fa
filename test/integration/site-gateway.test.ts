// The Site Gateway over the REST gateway: a web shop's credential creates and reads
// shopper-safe intents, browsers may call it only from the credential's allowed origins.
import t from "tap";
import { settleCredentialChanges } from "../../services/auth/credential-cache.ts";
import { createSiteCredential, revokeSiteCredential } from "../../services/site/credentials.ts";
import { call, idemKey, merchantWithKey, sampleIntent, startTestApp } from "../helpers/harness.ts";
import { runCli } from "../helpers/processes.ts";
import { watcherClient } from "../helpers/lifecycle.ts";

const { app, base, rpcUrl, databaseUrl } = await startTestApp(t);
const merchant = await merchantWithKey(app);
const shop = "https://shop.example";
const site = await createSiteCredential(app.db.em.fork(), merchant.merchant, "test", [shop, "http://localhost:3000"]);
const shopperKeys = ["amount_pending", "amount_received", "asset", "cancel_url", "checkout_url", "created_at", "deposit_address", "expires_at", "network", "other_assets_received", "payment_methods", "payment_uri", "pending_confirmations", "price_amount", "price_currency", "public_id", "quote", "redirect_url", "requested_amount", "required_confirmations", "status", "watched"];
const create = (credential: string, body: Record<string, unknown> = sampleIntent, headers: Record<string, string> = {}, key = idemKey()) =>
  call(base, "POST", "/api/v1/site-payment-intents", { key: credential, idempotencyKey: key, body, headers });
const read = (credential: string, id: string, headers: Record<string, string> = {}) =>
  call(base, "GET", `/api/v1/site-payment-intents/${id}`, { key: credential, headers });

t.test("a site credential creates and reads intents, and sees only the shopper view", async (t) => {
  t.match(site.credential, /^site_test_[0-9A-Za-z]{32}$/, "its prefix tells it apart from an API key");
  const key = idemKey();
  const body = { ...sampleIntent, merchant_reference: "<script>alert(1)</script>", expires_in_seconds: 600 };
  const created = await create(site.credential, body, {}, key);
  t.equal(created.status, 200, JSON.stringify(created.body));
  const view = created.body.data;
  t.same(Object.keys(view).sort(), shopperKeys, "exactly the shopper fields");
  t.equal(view.status, "pending");
  t.match(view.deposit_address, /^0x[0-9a-fA-F]{40}$/);
  t.match(view.payment_uri, /^ethereum:/);
  t.equal(view.amount_received, null);
  const again = await create(site.credential, body, {}, key);
  t.same(again.body.data, view, "the same Idempotency-Key replays");
  t.equal(again.headers.get("idempotent-replayed"), "true");
  t.equal((await create(site.credential, { ...body, requested_amount: "1" }, {}, key)).body.error?.code, "idempotency_conflict");

  const got = await read(site.credential, view.public_id);
  t.same(got.body.data, view, "GET returns the same shopper view");

  // The merchant sees the same intent through its API key, with everything, and its event.
  const full = await call(base, "GET", `/api/v1/merchants/${merchant.merchant}/payment-intents/${view.public_id}`, { key: merchant.key });
  t.equal(full.body.data.merchant_reference, body.merchant_reference, "the merchant sees its reference; the shopper does not");
  t.equal(full.body.data.deposit_address, view.deposit_address);
  const [event] = await app.db.em.fork().execute<{ type: string }[]>(`select type from webhook_events where payment_intent_id = ?`, [view.public_id]);
  t.equal(event?.type, "payment.intent.created", "the merchant's webhooks as usual");
});

t.test("bad input changes nothing", async (t) => {
  const cases: [Record<string, unknown>, string][] = [
    [{ ...sampleIntent, requested_amount: "-1" }, "requested_amount"],
    [{ ...sampleIntent, network: "dogecoin" }, "network"],
    [{ ...sampleIntent, expires_in_seconds: 5 }, "expires_in_seconds"],
    [{ ...sampleIntent, metadata: { a: "b" } }, "metadata"],
    [{ ...sampleIntent, merchant: merchant.merchant }, "merchant"],
    // The public credential does not say where the merchant's checkout page sends shoppers (docs/api.md).
    [{ ...sampleIntent, redirect_url: "https://shop.example/thanks" }, "redirect_url"],
  ];
  for (const [body, param] of cases) {
    const res = await create(site.credential, body);
    t.equal(res.status, 400, JSON.stringify(body));
    t.equal(res.body.error.param, param, `${JSON.stringify(body)}: param`);
  }
  const noKey = await call(base, "POST", "/api/v1/site-payment-intents", { key: site.credential, body: sampleIntent });
  t.equal(noKey.body.error.code, "idempotency_key_required");
});

t.test("credentials: the wrong kind or an unknown one is 401, and a revoked one at once", async (t) => {
  const { credential: internal } = await watcherClient(app, rpcUrl);
  // Any token that is not an active site credential is invalid_api_key; no header at all is unauthenticated.
  for (const [name, credential, code] of [
    ["an API key", merchant.key, "invalid_api_key"],
    ["an internal credential", internal, "invalid_api_key"],
    ["an unknown site credential", `site_test_${"a".repeat(32)}`, "invalid_api_key"],
    ["nothing", "", "unauthenticated"],
  ] as const) {
    const res = await create(credential, sampleIntent);
    t.equal(res.status, 401, `${name} on create`);
    t.equal(res.body.error.code, code);
    t.equal((await read(credential, "pi_x")).status, 401, `${name} on read`);
  }
  const onMerchantRoute = await call(base, "GET", `/api/v1/merchants/${merchant.merchant}/payment-intents`, { key: site.credential });
  t.equal(onMerchantRoute.status, 401, "a site credential on a merchant route");
  const revoked = await createSiteCredential(app.db.em.fork(), merchant.merchant, "test", []);
  t.equal((await create(revoked.credential)).status, 200);
  await revokeSiteCredential(app.db.em.fork(), revoked.id);
  await settleCredentialChanges(databaseUrl); // as the CLI does before it returns
  t.equal((await create(revoked.credential)).status, 401, "revoked: refused on the next request");
});

t.test("isolation: another merchant's or environment's intents are 404", async (t) => {
  const other = await merchantWithKey(app);
  const otherIntent = await call(base, "POST", `/api/v1/merchants/${other.merchant}/payment-intents`, { key: other.key, idempotencyKey: idemKey(), body: sampleIntent });
  t.equal((await read(site.credential, otherIntent.body.data.public_id)).status, 404, "another merchant's");
  const live = await merchantWithKey(app, "live", undefined, merchant.merchant);
  const liveIntent = await call(base, "POST", `/api/v1/merchants/${merchant.merchant}/payment-intents`, { key: live.key, idempotencyKey: idemKey(), body: sampleIntent });
  t.equal(liveIntent.status, 200);
  t.equal((await read(site.credential, liveIntent.body.data.public_id)).status, 404, "the merchant's Live intent with a Test site credential");
  t.equal((await read(site.credential, "pi_unknown")).status, 404);
});

t.test("CORS: only the credential's allowed origins", async (t) => {
  const allowed = await create(site.credential, sampleIntent, { origin: shop });
  t.equal(allowed.headers.get("access-control-allow-origin"), shop, "an allowed origin may read the answer");
  t.match(allowed.headers.get("vary") ?? "", /Origin/);
  t.match(allowed.headers.get("access-control-expose-headers") ?? "", /X-Request-Id/);
  const refused = await create(site.credential, sampleIntent, { origin: "https://evil.example" });
  // Issue 29: a copied site credential is refused from any page but the shop's own (it was 200 before).
  t.equal(refused.status, 403, "a browser request from another origin is refused");
  t.equal(refused.body.error?.code, "insufficient_scope");
  t.equal(refused.headers.get("access-control-allow-origin"), null, "another origin gets no CORS headers");
  const error = await read(site.credential, "pi_unknown", { origin: shop });
  t.equal(error.status, 404);
  t.equal(error.headers.get("access-control-allow-origin"), shop, "errors are readable by an allowed origin too");

  const preflight = (path: string, origin: string) =>
    fetch(base + path, { method: "OPTIONS", headers: { origin, "access-control-request-method": "POST", "access-control-request-headers": "authorization,content-type,idempotency-key" } });
  const ok = await preflight("/api/v1/site-payment-intents", shop);
  t.equal(ok.status, 204);
  t.equal(ok.headers.get("access-control-allow-origin"), shop);
  t.equal(ok.headers.get("access-control-allow-methods"), "POST");
  t.match(ok.headers.get("access-control-allow-headers") ?? "", /Idempotency-Key/);
  const okGet = await preflight(`/api/v1/site-payment-intents/pi_x`, "http://localhost:3000");
  t.equal(okGet.headers.get("access-control-allow-origin"), "http://localhost:3000", "each allowed origin");
  t.equal(okGet.headers.get("access-control-allow-methods"), "GET");
  const no = await preflight("/api/v1/site-payment-intents", "https://evil.example");
  t.equal(no.headers.get("access-control-allow-origin"), null, "a preflight from another origin gets no CORS headers");
  t.equal(no.headers.get("access-control-allow-methods"), null);
  const merchantRoute = await preflight(`/api/v1/merchants/${merchant.merchant}/payment-intents`, shop);
  t.equal(merchantRoute.status, 405, "no other route answers CORS");
  t.equal(merchantRoute.headers.get("access-control-allow-origin"), null);
  const onMerchantRoute = await call(base, "GET", `/api/v1/merchants/${merchant.merchant}/payment-intents`, { key: merchant.key, headers: { origin: shop } });
  t.equal(onMerchantRoute.headers.get("access-control-allow-origin"), null, "merchant routes never send CORS headers");
});

t.test("the admin CLI issues and revokes site credentials", async (t) => {
  const made = await runCli("services/app/admin.ts", { DATABASE_URL: databaseUrl }, "site-credential", "create", "--merchant", merchant.merchant, "--environment", "live", "--allowed-origin", "https://shop.example/", "--allowed-origin", "https://www.shop.example");
  t.equal(made.code, 0, made.stderr);
  const out = JSON.parse(made.stdout);
  t.match(out.credential, /^site_live_/);
  t.same(out.allowed_origins, ["https://shop.example", "https://www.shop.example"], "origins in their canonical form");
  const [row] = await app.db.em.fork().execute<{ secret_hash: string }[]>(`select secret_hash from site_credentials where id = ?`, [out.id]);
  t.not(row?.secret_hash, out.credential, "only a hash is stored");
  const bad = await runCli("services/app/admin.ts", { DATABASE_URL: databaseUrl }, "site-credential", "create", "--merchant", merchant.merchant, "--environment", "test", "--allowed-origin", "shop.example/path");
  t.equal(bad.code, 2);
  t.match(bad.stderr, /--allowed-origin must be a browser origin/);
  const revoked = await runCli("services/app/admin.ts", { DATABASE_URL: databaseUrl }, "site-credential", "revoke", "--id", out.id);
  t.equal(revoked.code, 0, revoked.stderr);
  t.match(JSON.parse(revoked.stdout), { id: out.id, revoked_at: String });
});
