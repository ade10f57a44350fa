// The merchant dashboard on the real app (gateway, rpc, worker, NATS, PostgreSQL), HTTP-level:
// headers, cookies and CSRF; sign-in that never tells whether a key exists, and its rate limit;
// a session that ends with its key or with sign-out; one-time links used once; read-only links
// refused a forged action; another merchant's ids not found; a session token refused on the API
// (REST and the RPC port) as an unknown key is. Browser flows: dashboard-browser.test.ts.
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import t from "tap";
import { AdminService } from "../../gen/payments/v1/admin_pb.ts";
import { DashboardService } from "../../gen/payments/v1/dashboard_pb.ts";
import { ErrorDetailSchema } from "../../gen/payments/v1/options_pb.ts";
import { IntentService } from "../../gen/payments/v1/payment_intents_pb.ts";
import { createInternalCredential, revokeApiKey } from "../../services/auth/admin.ts";
import { dashboardContentSecurityPolicy } from "../../services/dashboard/handler.ts";
import { call, freshMinute, idemKey, merchantWithKey, sampleIntent, startTestApp } from "../helpers/harness.ts";
import { runCli } from "../helpers/processes.ts";
import { dashboardClient } from "../helpers/dashboard.ts";

const signInLimit = 40;
// Loopback is a trusted proxy, so a request can come from another address (X-Forwarded-For).
const s = await startTestApp(t, { DASHBOARD_BASE_URL: "http://127.0.0.1/dashboard", DASHBOARD_SIGN_IN_RATE_LIMIT_PER_MINUTE: String(signInLimit), TRUSTED_PROXIES: "127.0.0.1" });
const a = await merchantWithKey(s.app);
const b = await merchantWithKey(s.app);
const { credential } = await createInternalCredential(s.app.db.em.fork(), "dashboard test", ["admin"], "test");
const admin = createClient(AdminService, createGrpcTransport({ baseUrl: s.rpcUrl }));
const internal = { headers: { authorization: `Bearer ${credential}` } };
const cliEnv = { RPC_URL: s.rpcUrl, INTERNAL_CREDENTIAL: credential, DATABASE_URL: s.databaseUrl };

async function createIntent(key: string, merchant: string, body: Record<string, unknown> = sampleIntent) {
  const res = await call(s.base, "POST", `/api/v1/merchants/${merchant}/payment-intents`, { key, idempotencyKey: idemKey(), body });
  if (res.status !== 200) throw new Error(`create: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data;
}
const statusOf = async (id: string, key = a.key, merchant = a.merchant) => (await call(s.base, "GET", `/api/v1/merchants/${merchant}/payment-intents/${id}`, { key })).body.data.status;

await freshMinute();

t.test("pages: strict CSP, no caching, no framing; signed out goes to sign-in", async (t) => {
  const c = dashboardClient(s.base);
  const res = await c.get("/dashboard/payments");
  t.equal(res.status, 303);
  t.equal(res.headers.get("location"), "/dashboard/sign-in");
  const page = await c.get("/dashboard/sign-in");
  t.equal(page.status, 200);
  t.equal(page.headers.get("content-security-policy"), dashboardContentSecurityPolicy);
  t.match(dashboardContentSecurityPolicy, "frame-ancestors 'none'");
  t.notMatch(dashboardContentSecurityPolicy, "unsafe-inline");
  t.equal(page.headers.get("cache-control"), "no-store");
  t.equal(page.headers.get("x-frame-options"), "DENY");
  t.match(page.body, /<label for="api-key">API key<\/label>/);
  t.notMatch(page.body, /<script>|style=/, "no inline script or style");
  const cookie = page.headers.get("set-cookie") ?? "";
  t.match(cookie, /HttpOnly/);
  t.match(cookie, /SameSite=Strict/);
  t.match(cookie, /Path=\/dashboard/);
  // The API's route table is the spec's: nothing of the dashboard's is under /api/.
  t.equal((await call(s.base, "GET", `/api/v1/dashboard`)).status, 404);
});

t.test("sign-in with a key: a session cookie; a wrong key, an unknown one and a malformed one get the same answer", async (t) => {
  const answers: string[] = [];
  for (const key of [a.key.slice(0, -1) + (a.key.endsWith("x") ? "y" : "x"), "sk_test_" + "0".repeat(32), "not a key", ""]) {
    const c = dashboardClient(s.base);
    const res = await c.signIn(key);
    t.equal(res.status, 401, "refused");
    t.equal(c.session(), undefined, "no session");
    answers.push(res.body.replace(/name="csrf" value="[^"]+"/, ""));
  }
  t.equal(new Set(answers).size, 1, "one answer for every failure");
  t.match(answers[0], "That API key was not accepted.");
  t.notMatch(answers[0], a.key);

  const c = dashboardClient(s.base);
  const res = await c.signIn(a.key);
  t.equal(res.status, 303);
  t.equal(res.headers.get("location"), "/dashboard/payments");
  const cookie = res.headers.getSetCookie().find((x: string) => x.startsWith("dashboard_session=")) ?? "";
  t.match(cookie, /^dashboard_session=dsh_test_[0-9A-Za-z]{40}; Path=\/dashboard; HttpOnly; SameSite=Strict$/);
  const page = await c.get("/dashboard/payments");
  t.equal(page.status, 200);
  t.match(page.body, "Test mode", "the environment is shown");
  t.match(page.body, a.merchant);
  t.notMatch(page.body, a.key, "the key is never shown");

  const signOut = await c.post("/dashboard/sign-out", {});
  t.equal(signOut.status, 303);
  t.equal(c.session(), undefined, "the cookie is cleared");
  t.equal((await c.get("/dashboard/payments")).status, 303, "signed out");
  t.equal((await c.get("/dashboard/payments", { session: c.lastSession })).status, 303, "the old session token is refused");
});

t.test("a session token is the dashboard's only: on the REST API and the RPC port it is refused like an unknown key", async (t) => {
  const intent = await createIntent(a.key, a.merchant);
  const c = dashboardClient(s.base);
  t.equal((await c.signIn(a.key)).status, 303);
  const token = c.session() ?? "";
  t.match(token, /^dsh_test_[0-9A-Za-z]{40}$/);

  const list = `/api/v1/merchants/${a.merchant}/payment-intents`;
  const withSession = await call(s.base, "GET", list, { key: token });
  const withUnknownKey = await call(s.base, "GET", list, { key: `sk_test_${"U".repeat(32)}` });
  t.equal(withSession.status, 401);
  t.equal(withSession.body?.error?.code, "invalid_api_key");
  t.match(withSession.headers.get("x-request-id"), /^req_/);
  t.equal(withSession.body?.error?.request_id, withSession.headers.get("x-request-id"), "the documented envelope");
  const bare = (body: { error: Record<string, unknown> }) => ({ ...body, error: { ...body.error, request_id: undefined } });
  t.same(bare(withSession.body), bare(withUnknownKey.body), "the same answer as a made-up key's, but for the request id");
  t.notOk(JSON.stringify(withSession.body).includes("dsh_"), "nothing says what the token looks like");
  // Not through a header meant for the dashboard's own calls either.
  for (const name of ["x-dashboard-call", "x-dashboard-session", "cookie"]) {
    const res = await call(s.base, "GET", list, { key: token, headers: { [name]: name === "cookie" ? `dashboard_session=${token}` : "true" } });
    t.equal(res.body?.error?.code, "invalid_api_key", `with ${name}`);
  }

  // Over gRPC on the RPC port: the API's methods, and the dashboard's own.
  const transport = createGrpcTransport({ baseUrl: s.rpcUrl });
  const refusal = async (p: Promise<unknown>) => {
    try {
      await p;
    } catch (err) {
      const e = ConnectError.from(err);
      return { code: e.code, detail: e.findDetails(ErrorDetailSchema)[0]?.code, message: e.rawMessage };
    }
    return undefined;
  };
  const bearer = (v: string) => ({ headers: { authorization: `Bearer ${v}` } });
  const rpcUnknown = await refusal(createClient(IntentService, transport).listPaymentIntents({ merchant: a.merchant }, bearer(`sk_test_${"U".repeat(32)}`)));
  t.same(rpcUnknown && { code: rpcUnknown.code, detail: rpcUnknown.detail }, { code: Code.Unauthenticated, detail: "invalid_api_key" });
  t.same(await refusal(createClient(IntentService, transport).listPaymentIntents({ merchant: a.merchant }, bearer(token))), rpcUnknown, "ListPaymentIntents");
  t.same(await refusal(createClient(DashboardService, transport).getDashboardSession({}, bearer(token))), rpcUnknown, "GetDashboardSession");

  // The same session still works where it belongs.
  const page = await c.get("/dashboard/payments");
  t.equal(page.status, 200);
  t.match(page.body, intent.public_id, "the dashboard lists the intent");
  t.equal(c.session(), token, "with the same session");
});

t.test("a form without its CSRF token changes nothing", async (t) => {
  const c = dashboardClient(s.base);
  await c.signIn(a.key);
  const pi = await createIntent(a.key, a.merchant);
  const forged = await c.post(`/dashboard/payments/${pi.public_id}/cancel`, { idem: "dash-" + "a".repeat(24) }, { csrf: false });
  t.equal(forged.status, 403);
  t.equal(await statusOf(pi.public_id), "pending");
  const wrong = await c.post(`/dashboard/payments/${pi.public_id}/cancel`, { idem: "dash-" + "b".repeat(24), csrf: "x".repeat(32) }, { csrf: false });
  t.equal(wrong.status, 403);
  t.equal(await statusOf(pi.public_id), "pending");
  const cancelled = await c.post(`/dashboard/payments/${pi.public_id}/cancel`, { idem: "dash-" + "c".repeat(24) });
  t.equal(cancelled.status, 303);
  t.equal(await statusOf(pi.public_id), "cancelled", "with its token the same form works");
});

t.test("another merchant's intent and endpoint are not found", async (t) => {
  const c = dashboardClient(s.base);
  await c.signIn(a.key);
  const theirs = await createIntent(b.key, b.merchant);
  const page = await c.get(`/dashboard/payments/${theirs.public_id}`);
  t.equal(page.status, 404);
  t.match(page.body, "Not found");
  const cancel = await c.post(`/dashboard/payments/${theirs.public_id}/cancel`, { idem: "dash-" + "d".repeat(24) });
  t.equal(cancel.status, 404);
  t.equal(await statusOf(theirs.public_id, b.key, b.merchant), "pending");
  const search = await c.get(`/dashboard/payments?search=${encodeURIComponent(theirs.deposit_address)}`);
  t.equal(search.status, 200);
  t.notMatch(search.body, theirs.public_id, "a search finds only the merchant's own");
  t.equal((await c.get(`/dashboard/payments/pi_%2e%2e`)).status, 404, "a malformed id is not looked up");
});

t.test("revoking the key ends its sessions on the next request", async (t) => {
  const key = await merchantWithKey(s.app, "test", undefined, a.merchant);
  const c = dashboardClient(s.base);
  await c.signIn(key.key);
  t.equal((await c.get("/dashboard/payments")).status, 200);
  const csrf = await c.csrf();
  const token = c.session() ?? "";
  await revokeApiKey(s.app.db.em.fork(), key.keyId);
  const after = await c.get("/dashboard/payments");
  t.equal(after.status, 303);
  t.equal(after.headers.get("location"), "/dashboard/sign-in");
  const action = await c.request("POST", "/dashboard/webhooks", { session: token, form: new URLSearchParams({ csrf, url: "https://hooks.example.test/x", idem: "dash-" + "e".repeat(24) }) });
  t.equal(action.status, 401, "an action with it is refused too");
  t.equal((await call(s.base, "GET", `/api/v1/merchants/${a.merchant}/webhook-endpoints`, { key: a.key })).body.data.length, 0, "and made nothing");
});

t.test("a one-time link (AdminService and the admin CLI): works once; a read-only one shows no action and a forged one is refused", async (t) => {
  const link = await admin.createDashboardLink({ merchant: a.merchant, readOnly: true, ttlSeconds: 600 }, internal);
  t.match(link.url, /^http:\/\/127\.0\.0\.1\/dashboard\/link#token=dlk_[0-9A-Za-z]{40}$/);
  t.equal(link.url.split("#token=")[1], link.token);
  const c = dashboardClient(s.base);
  const used = await c.exchange(link.token);
  t.equal(used.status, 303);
  const pi = await createIntent(a.key, a.merchant);
  const page = await c.get(`/dashboard/payments/${pi.public_id}`);
  t.equal(page.status, 200);
  t.match(page.body, "Read-only");
  t.notMatch(page.body, /Cancel payment/, "no cancel button");
  t.notMatch((await c.get("/dashboard/webhooks")).body, /Add an endpoint/, "no create form");
  const forged = await c.post(`/dashboard/payments/${pi.public_id}/cancel`, { idem: "dash-" + "f".repeat(24) });
  t.equal(forged.status, 403, "a forged action with a valid CSRF token is refused by scope");
  t.equal(await statusOf(pi.public_id), "pending", "and changes nothing");

  const again = await dashboardClient(s.base).exchange(link.token);
  t.equal(again.status, 401, "the link works once");
  t.match(again.body, "not valid");

  const out = await runCli("services/app/admin.ts", cliEnv, "dashboard-link", "--merchant", a.merchant, "--environment", "test", "--ttl", "5m", "--scopes", "payment_intents:read,payment_intents:write");
  t.equal(out.code, 0, out.stderr);
  const printed = JSON.parse(out.stdout);
  t.match(printed.url, /\/dashboard\/link#token=dlk_/);
  t.equal(printed.read_only, false);
  t.same(printed.scopes, ["payment_intents:read", "payment_intents:write"], "the scopes named");
  const full = dashboardClient(s.base);
  t.equal((await full.exchange(printed.url.split("#token=")[1])).status, 303);
  t.match((await full.get(`/dashboard/payments/${pi.public_id}`)).body, /Cancel payment/, "a full link's session may act");
  const bad = await runCli("services/app/admin.ts", cliEnv, "dashboard-link", "--merchant", a.merchant, "--environment", "live");
  t.equal(bad.code, 2, "another environment than the credential's is refused");
});

t.test("the payments list's exception badge: underpaid, reorged, a payment in another asset; none for a plain pending one", async (t) => {
  const simulate = async (id: string, outcome: string) => {
    const res = await call(s.base, "POST", `/api/v1/sandbox/merchants/${a.merchant}/payment-intents/${id}/simulate`, { key: a.key, body: { outcome } });
    if (res.status !== 200) throw new Error(`simulate: ${res.status} ${JSON.stringify(res.body)}`);
  };
  const underpaid = await createIntent(a.key, a.merchant);
  await simulate(underpaid.public_id, "underpaid");
  const reorged = await createIntent(a.key, a.merchant);
  await simulate(reorged.public_id, "confirmed");
  await simulate(reorged.public_id, "reorged");
  const wrong = await createIntent(a.key, a.merchant);
  // A USDT output to a USDC intent's address, as a watcher records it (payment.exception's case).
  await s.app.db.em.fork().execute(
    `insert into chain_observations (network, environment, asset, to_address, tx_hash, output_index, amount, confirmations, observed_at, payment_intent_id, counted, exception_reported_at, created_at, updated_at)
     values ('ethereum', 'test', 'USDT', ?, ?, 0, 5, 3, now(), ?, false, now(), now(), now())`,
    [wrong.deposit_address, `0x${"ab".repeat(32)}`, wrong.public_id],
  );
  const plain = await createIntent(a.key, a.merchant);
  const c = dashboardClient(s.base);
  await c.signIn(a.key);
  const page = (await c.get("/dashboard/payments")).body;
  const rowOf = (id: string) => page.split("<tr>").find((r) => r.includes(`>${id}</a>`)) ?? "";
  t.match(rowOf(underpaid.public_id), /Exception: underpaid/);
  t.match(rowOf(reorged.public_id), /Exception: [^<]*reorged/);
  t.match(rowOf(wrong.public_id), /Exception: wrong asset/);
  t.notMatch(rowOf(plain.public_id), /Exception/);
  t.match((await c.get(`/dashboard/payments/${wrong.public_id}`)).body, /Exception: wrong asset/, "and on the intent's page");
  const byHash = await c.get(`/dashboard/payments?search=0x${"ab".repeat(32)}`);
  t.match(byHash.body, wrong.public_id, "found by its transaction hash");
  t.equal(byHash.body.split("<tr>").length - 2, 1, "and only it");
});

t.test("a key with read scopes only: no action shown, and a forged one refused", async (t) => {
  const reader = await merchantWithKey(s.app, "test", ["payment_intents:read", "webhooks:read"], a.merchant);
  const pi = await createIntent(a.key, a.merchant);
  const c = dashboardClient(s.base);
  t.equal((await c.signIn(reader.key)).status, 303);
  const page = await c.get(`/dashboard/payments/${pi.public_id}`);
  t.equal(page.status, 200);
  t.notMatch(page.body, /Cancel payment/);
  const forged = await c.post(`/dashboard/payments/${pi.public_id}/cancel`, { idem: "dash-" + "g".repeat(24) });
  t.equal(forged.status, 403);
  t.equal(await statusOf(pi.public_id), "pending");
  t.equal((await c.get("/dashboard/readiness")).status, 403, "a page its key may not read is refused, not shown empty");
});

t.test("a session unused past its idle time, or past its absolute expiry, is over", async (t) => {
  for (const column of ["last_seen_at", "expires_at"]) {
    const c = dashboardClient(s.base);
    await c.signIn(a.key);
    t.equal((await c.get("/dashboard/payments")).status, 200);
    await s.app.db.em.fork().execute(`update dashboard_sessions set ${column} = now() - interval '1 day' where revoked_at is null and created_at > now() - interval '1 minute'`);
    const after = await c.get("/dashboard/payments");
    t.equal(after.status, 303, column);
    t.equal(after.headers.get("location"), "/dashboard/sign-in");
  }
});

t.test("sign-in is rate-limited per key tried, from however many addresses", async (t) => {
  const guessed = `sk_test_${"1".repeat(32)}`;
  let limited: Awaited<ReturnType<ReturnType<typeof dashboardClient>["signIn"]>> | undefined;
  for (let i = 1; i <= signInLimit * 2 + 2 && !limited; i++) {
    const res = await dashboardClient(s.base, "/dashboard", { "x-forwarded-for": `198.51.${Math.floor(i / 250)}.${i % 250}` }).signIn(guessed);
    if (res.status === 429) limited = res;
  }
  t.ok(limited, "the same key from a new address each time is refused with 429");
  const elsewhere = dashboardClient(s.base, "/dashboard", { "x-forwarded-for": "203.0.113.9" });
  t.equal((await elsewhere.signIn(a.key)).status, 303, "another key from another address signs in");
});

t.test("sign-in is rate-limited per address: past the limit even the right key gets no session", async (t) => {
  let limited: Awaited<ReturnType<ReturnType<typeof dashboardClient>["signIn"]>> | undefined;
  for (let i = 0; i < signInLimit * 2 + 2 && !limited; i++) {
    const res = await dashboardClient(s.base).signIn(`sk_test_${String(i).padStart(32, "0")}`);
    if (res.status === 429) limited = res;
  }
  t.ok(limited, "refused with 429");
  t.ok(Number(limited?.headers.get("retry-after")) > 0, "with Retry-After");
  const c = dashboardClient(s.base);
  const right = await c.signIn(a.key);
  t.equal(right.status, 429);
  t.equal(c.session(), undefined);
});
