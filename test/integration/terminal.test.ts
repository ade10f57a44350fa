// The point-of-sale terminal: cashier sessions (issued, listed, revoked, expiring) and
// POST /api/v1/terminal/pos/payment over the REST gateway and over gRPC.
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import t from "tap";
import { ErrorDetailSchema } from "../../gen/payments/v1/options_pb.ts";
import { TerminalService } from "../../gen/payments/v1/terminal_pb.ts";
import { settleCredentialChanges } from "../../services/auth/credential-cache.ts";
import { createSiteCredential } from "../../services/site/credentials.ts";
import { createCashierSession, listCashierSessions, revokeCashierSession } from "../../services/terminal/sessions.ts";
import { call, idemKey, merchantWithKey, sampleIntent, startTestApp, until } from "../helpers/harness.ts";
import { runCli } from "../helpers/processes.ts";

const { app, base, rpcUrl, databaseUrl } = await startTestApp(t);
const a = await merchantWithKey(app);
const em = () => app.db.em.fork();
const session = await createCashierSession(em(), { merchantId: a.merchant, environment: "test", cashier: "Ana", terminal: "Till 2" });
/** `key` null: no Idempotency-Key header. */
const pay = (credential: string, body: Record<string, unknown> = sampleIntent, key: string | null = idemKey()) =>
  call(base, "POST", "/api/v1/terminal/pos/payment", { key: credential, idempotencyKey: key ?? undefined, body });

t.test("a cashier takes a payment: an ordinary intent marked pos, with its cashier and terminal", async (t) => {
  t.match(session.session, /^pos_test_[0-9A-Za-z]{32}$/, "its prefix tells a session apart");
  const key = idemKey();
  const res = await pay(session.session, { ...sampleIntent, merchant_reference: "table-4" }, key);
  t.equal(res.status, 200, JSON.stringify(res.body));
  const pi = res.body.data;
  t.match(pi, { status: "pending", source: "pos", cashier: "Ana", terminal: "Till 2", environment: "test", merchant_reference: "table-4" });
  t.match(pi.deposit_address, /^0x[0-9a-fA-F]{40}$/);
  t.match(pi.payment_uri, new RegExp(`address=${pi.deposit_address}`));
  t.match(pi.checkout_url, new RegExp(`/${pi.public_id}$`));
  t.equal((Date.parse(pi.expires_at) - Date.parse(pi.created_at)) / 1000, 900, "15 minutes at the counter by default");
  const again = await pay(session.session, { ...sampleIntent, merchant_reference: "table-4" }, key);
  t.same(again.body.data, pi, "the same Idempotency-Key replays");
  t.equal((await pay(session.session, sampleIntent, key)).body.error?.code, "idempotency_conflict");
  t.equal((await pay(session.session, sampleIntent, null)).body.error?.code, "idempotency_key_required");

  const seen = await call(base, "GET", `/api/v1/merchants/${a.merchant}/payment-intents/${pi.public_id}`, { key: a.key });
  t.match(seen.body.data, { source: "pos", cashier: "Ana", terminal: "Till 2" }, "the merchant sees it, with the cashier and terminal");
  const [event] = await em().execute<{ type: string }[]>(`select type from webhook_events where payment_intent_id = ?`, [pi.public_id]);
  t.equal(event?.type, "payment.intent.created", "and its webhooks as usual");
  const api = await call(base, "POST", `/api/v1/merchants/${a.merchant}/payment-intents`, { key: a.key, idempotencyKey: idemKey(), body: sampleIntent });
  t.match(api.body.data, { source: "api", cashier: null, terminal: null }, "an API intent says so");
});

t.test("the payment URI of a pos payment per network", async (t) => {
  const cases: [Record<string, string>, RegExp][] = [
    [{ network: "bitcoin", asset: "BTC", requested_amount: "0.0015" }, /^bitcoin:tb1q[0-9a-z]+\?amount=0\.0015$/],
    [{ network: "ethereum", asset: "ETH", requested_amount: "0.5" }, /^ethereum:0x[0-9a-fA-F]{40}@11155111\?value=500000000000000000$/],
    [{ network: "ethereum", asset: "USDT", requested_amount: "2" }, /^ethereum:0x[0-9a-fA-F]{40}@11155111\/transfer\?address=0x[0-9a-fA-F]{40}&uint256=2000000$/],
    [{ network: "polygon", asset: "USDC", requested_amount: "2" }, /^ethereum:0x41E94Eb019C0762f9Bfcf9Fb1E58725BfB0e7582@80002\/transfer\?address=0x[0-9a-fA-F]{40}&uint256=2000000$/],
    [{ network: "tron", asset: "USDT", requested_amount: "2.5" }, /^tron:T[1-9A-HJ-NP-Za-km-z]{33}\?amount=2\.5&token=T[1-9A-HJ-NP-Za-km-z]{33}$/],
    [{ network: "solana", asset: "SOL", requested_amount: "1.25" }, /^solana:[1-9A-HJ-NP-Za-km-z]{32,44}\?amount=1\.25$/],
    [{ network: "solana", asset: "USDC", requested_amount: "1.25" }, /^solana:[1-9A-HJ-NP-Za-km-z]{32,44}\?amount=1\.25&spl-token=4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU$/],
  ];
  for (const [body, uri] of cases) {
    const res = await pay(session.session, body);
    t.equal(res.status, 200, `${body.network}/${body.asset}`);
    t.match(res.body.data.payment_uri, uri, `${body.network}/${body.asset}: ${res.body.data.payment_uri}`);
  }
});

t.test("bad input is 400 with its param, and creates nothing", async (t) => {
  const before = await em().execute<{ n: number }[]>(`select count(*)::int as n from payment_intents where source = 'pos'`);
  const cases: [Record<string, unknown>, string][] = [
    [{ ...sampleIntent, requested_amount: "1e3" }, "requested_amount"],
    [{ ...sampleIntent, asset: "DOGE" }, "asset"],
    [{ ...sampleIntent, expires_in_seconds: 10 }, "expires_in_seconds"],
    [{ ...sampleIntent, merchant_reference: "" }, "merchant_reference"],
    [{ ...sampleIntent, metadata: {} }, "metadata"],
    [{ ...sampleIntent, cashier: "Mallory" }, "cashier"],
  ];
  for (const [body, param] of cases) {
    const res = await pay(session.session, body);
    t.equal(res.status, 400, JSON.stringify(body));
    t.equal(res.body.error?.code, "validation_failed");
    t.equal(res.body.error?.param, param, `${JSON.stringify(body)}: param`);
  }
  const after = await em().execute<{ n: number }[]>(`select count(*)::int as n from payment_intents where source = 'pos'`);
  t.same(after, before, "nothing created");
});

t.test("credentials: wrong kind, unknown, revoked and expired sessions", async (t) => {
  const site = await createSiteCredential(em(), a.merchant, "test", []);
  // Any token that is not an active cashier session is invalid_api_key; no header at all is unauthenticated.
  for (const [name, credential, code] of [
    ["an API key", a.key, "invalid_api_key"],
    ["a site credential", site.credential, "invalid_api_key"],
    ["an unknown session", `pos_test_${"b".repeat(32)}`, "invalid_api_key"],
    ["nothing", "", "unauthenticated"],
  ] as const) {
    const res = await pay(credential);
    t.equal(res.status, 401, name);
    t.equal(res.body.error?.code, code, name);
  }
  const onMerchantRoute = await call(base, "GET", `/api/v1/merchants/${a.merchant}/payment-intents`, { key: session.session });
  t.equal(onMerchantRoute.status, 401, "a cashier session on a merchant route");

  const expiring = await createCashierSession(em(), { merchantId: a.merchant, environment: "test", cashier: "Bo" });
  t.equal((await pay(expiring.session)).status, 200);
  await em().execute(`update cashier_sessions set expires_at = now() - interval '1 second' where id = ?`, [expiring.id]);
  await settleCredentialChanges(databaseUrl); // the processes held the row with its old expiry
  const expired = await pay(expiring.session);
  t.equal(expired.status, 401);
  t.equal(expired.body.error.code, "session_expired");

  const revoked = await createCashierSession(em(), { merchantId: a.merchant, environment: "test", cashier: "Cy" });
  await revokeCashierSession(em(), revoked.id);
  await settleCredentialChanges(databaseUrl); // as the CLI does before it returns
  t.equal((await pay(revoked.session)).body.error?.code, "invalid_api_key", "revoked: refused at once");

  const listed = await listCashierSessions(em(), a.merchant);
  t.same(
    listed.filter((s) => [expiring.id, revoked.id, session.id].includes(s.id)).map((s) => [s.id, s.state]).sort(),
    [[expiring.id, "expired"], [revoked.id, "revoked"], [session.id, "active"]].sort(),
    "list shows each session's state",
  );
  t.notOk(JSON.stringify(listed).includes(session.session), "and never a secret");
});

t.test("isolation: a session only ever touches its own merchant and environment", async (t) => {
  const b = await merchantWithKey(app);
  const res = await pay(session.session, { ...sampleIntent, merchant: b.merchant });
  t.equal(res.status, 400, "a merchant in the body is refused");
  const mine = await pay(session.session);
  t.equal((await call(base, "GET", `/api/v1/merchants/${b.merchant}/payment-intents/${mine.body.data.public_id}`, { key: b.key })).status, 404, "B never sees A's pos intent");
  const live = await merchantWithKey(app, "live", undefined, a.merchant);
  const liveSession = await createCashierSession(em(), { merchantId: a.merchant, environment: "live", cashier: "Di" });
  const livePay = await pay(liveSession.session);
  t.equal(livePay.body.data.environment, "live", "a Live session makes Live intents");
  t.equal((await call(base, "GET", `/api/v1/merchants/${a.merchant}/payment-intents/${livePay.body.data.public_id}`, { key: a.key })).status, 404, "not visible to a Test key");
  t.equal((await call(base, "GET", `/api/v1/merchants/${a.merchant}/payment-intents/${livePay.body.data.public_id}`, { key: live.key })).status, 200);
});

t.test("over gRPC with the Connect client", async (t) => {
  const client = createClient(TerminalService, createGrpcTransport({ baseUrl: rpcUrl }));
  const res = await client.createPosPayment({ ...sampleIntent, requestedAmount: "3" }, { headers: { authorization: `Bearer ${session.session}`, "idempotency-key": idemKey() } });
  t.match(res.data, { source: "pos", cashier: "Ana", requestedAmount: "3" });
  const err = await client.createPosPayment({ ...sampleIntent, requestedAmount: "3" }, { headers: { authorization: `Bearer ${a.key}`, "idempotency-key": idemKey() } }).then(
    () => undefined,
    (e: unknown) => ConnectError.from(e),
  );
  t.equal(err?.code, Code.Unauthenticated);
  t.equal(err?.findDetails(ErrorDetailSchema)[0]?.code, "invalid_api_key");
});

t.test("the admin CLI issues, lists and revokes every credential type", async (t) => {
  const env = { DATABASE_URL: databaseUrl };
  const cli = async (...args: string[]) => {
    const run = await runCli("services/app/admin.ts", env, ...args);
    if (run.code !== 0) throw new Error(`${args.join(" ")}: ${run.code} ${run.stderr}`);
    return JSON.parse(run.stdout);
  };
  const made = await cli("cashier-session", "create", "--merchant", a.merchant, "--environment", "test", "--cashier", "Eve", "--terminal", "Till 9", "--ttl-minutes", "30");
  t.match(made, { id: String, session: /^pos_test_/, expires_at: String, cashier: "Eve", terminal: "Till 9" });
  t.ok(Math.abs(Date.parse(made.expires_at) - Date.now() - 30 * 60_000) < 60_000, "expires in 30 minutes");
  t.ok((await cli("cashier-session", "list", "--merchant", a.merchant)).some((s: { id: string }) => s.id === made.id));
  t.match(await cli("cashier-session", "revoke", "--id", made.id), { id: made.id, revoked_at: String });
  const bad = await runCli("services/app/admin.ts", env, "cashier-session", "create", "--merchant", a.merchant, "--environment", "test", "--cashier", "Eve", "--ttl-minutes", "0");
  t.equal(bad.code, 2);
  t.match(bad.stderr, /--ttl-minutes/);

  const keys = await cli("api-key", "list", "--merchant", a.merchant);
  t.ok(keys.some((k: { id: string }) => k.id === a.keyId), "api-key list");
  t.notOk(JSON.stringify(keys).includes(a.key), "without the secret");
  // Each key's last use, as its process wrote it (after the call, at most once a minute); null: never used.
  type Listed = { id: string; last_used_at: string | null };
  const unused = await cli("api-key", "create", "--merchant", a.merchant, "--environment", "test", "--scopes", "payment_intents:read");
  t.equal((await cli("api-key", "list", "--merchant", a.merchant)).find((k: Listed) => k.id === unused.id)?.last_used_at, null, "a key never used: last_used_at null");
  t.equal((await call(base, "GET", "/api/v1/api-key", { key: a.key })).status, 200);
  let used: Listed | undefined;
  await until("the key's last use listed", async () => ((used = (await cli("api-key", "list", "--merchant", a.merchant)).find((k: Listed) => k.id === a.keyId))?.last_used_at ?? null) !== null, 20_000);
  t.ok(Math.abs(Date.parse(used!.last_used_at!) - Date.now()) < 120_000, `a used key's last use: ${used!.last_used_at}`);
  const site = await cli("site-credential", "create", "--merchant", a.merchant, "--environment", "test");
  const sites = await cli("site-credential", "list", "--merchant", a.merchant);
  t.ok(sites.some((s: { id: string }) => s.id === site.id), "site-credential list");
  t.notOk(JSON.stringify(sites).includes(site.credential));
  const internal = await cli("internal-credential", "create", "--name", "watcher", "--roles", "observe", "--environment", "test");
  const internals = await cli("internal-credential", "list");
  t.ok(internals.some((c: { id: string }) => c.id === internal.id), "internal-credential list");
  t.notOk(JSON.stringify(internals).includes(internal.credential));
});
