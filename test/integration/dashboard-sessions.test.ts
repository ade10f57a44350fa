// Dashboard sessions that can be taken back (issue 64): a link's session has the scopes its link
// names (read-only ones by default) whatever happens to the merchant's keys; a revoked link ends
// its session; the operator lists and ends a merchant's sessions; signing in ends the browser's
// earlier session; a link opened by a signed-in browser asks first; on https the cookies are
// __Host- ones. Real service and PostgreSQL, the admin CLI as an operator runs it, HTTP as a
// browser sends it (the Chromium side is in dashboard-browser.test.ts).
import t from "tap";
import { revokeApiKey } from "../../services/auth/admin.ts";
import { call, idemKey, merchantWithKey, sampleIntent, startTestApp } from "../helpers/harness.ts";
import { runCli } from "../helpers/processes.ts";
import { dashboardClient } from "../helpers/dashboard.ts";

const s = await startTestApp(t, { DASHBOARD_BASE_URL: "http://127.0.0.1/dashboard", DASHBOARD_SIGN_IN_RATE_LIMIT_PER_MINUTE: "1000" });
// No INTERNAL_CREDENTIAL: the admin CLI writes links to the database, as on a fresh install.
const cliEnv = { DATABASE_URL: s.databaseUrl, DASHBOARD_BASE_URL: "http://127.0.0.1/dashboard" };
const admin = async (...args: string[]) => {
  const run = await runCli("services/app/admin.ts", cliEnv, ...args);
  if (run.code !== 0) throw new Error(`admin ${args.join(" ")}: ${run.code} ${run.stderr}`);
  return JSON.parse(run.stdout);
};

async function createIntent(key: string, merchant: string): Promise<string> {
  const res = await call(s.base, "POST", `/api/v1/merchants/${merchant}/payment-intents`, { key, idempotencyKey: idemKey(), body: sampleIntent });
  if (res.status !== 200) throw new Error(JSON.stringify(res.body));
  return res.body.data.public_id;
}

/** Signs a new browser in with a link the CLI issued (extra arguments to dashboard-link). */
async function linkSession(merchant: string, ...args: string[]) {
  const link = await admin("dashboard-link", "--merchant", merchant, "--environment", "test", ...args);
  const c = dashboardClient(s.base);
  const used = await c.exchange(link.url.split("#token=")[1]);
  if (used.status !== 303) throw new Error(`exchange: ${used.status} ${used.body}`);
  return { c, link };
}

t.test("a link names its session's scopes: read ones by default, and revoking every key changes nothing of it", async (t) => {
  const a = await merchantWithKey(s.app);
  const pi = await createIntent(a.key, a.merchant);
  const { c, link } = await linkSession(a.merchant);
  t.same(link.scopes, ["payment_intents:read", "webhooks:read", "merchant:readiness"], "the CLI says which scopes");
  t.match(link.url, /^http:\/\/127\.0\.0\.1\/dashboard\/link#token=dlk_/, "the URL under DASHBOARD_BASE_URL, written with no internal credential");
  const page = await c.get(`/dashboard/payments/${pi}`);
  t.equal(page.status, 200, "it reads");
  t.notMatch(page.body, /Cancel payment/, "no action shown");
  t.match(page.body, "Read-only");
  t.equal((await c.post(`/dashboard/payments/${pi}/cancel`, { idem: `dash-${"a".repeat(24)}` })).status, 403, "a forged cancel is refused by scope");

  await revokeApiKey(s.app.db.em.fork(), a.keyId);
  t.equal((await c.post(`/dashboard/payments/${pi}/cancel`, { idem: `dash-${"b".repeat(24)}` })).status, 403, "with the key revoked: still its link's scopes, no more");
  t.equal((await call(s.base, "GET", `/api/v1/merchants/${a.merchant}/payment-intents/${pi}`, { key: (await merchantWithKey(s.app, "test", undefined, a.merchant)).key })).body.data.status, "pending", "nothing changed");

  const writer = await linkSession(a.merchant, "--scopes", "payment_intents:read,payment_intents:write");
  t.match((await writer.c.get(`/dashboard/payments/${pi}`)).body, /Cancel payment/, "a link that names a write scope may act");
  const bad = await runCli("services/app/admin.ts", cliEnv, "dashboard-link", "--merchant", a.merchant, "--environment", "test", "--scopes", "payment_intents:delete");
  t.equal(bad.code, 2);
  t.match(bad.stderr, /--scopes takes a comma-separated list of: .*unknown: payment_intents:delete/);
});

t.test("a revoked link: unused, refused; used, its session signed out at its next request", async (t) => {
  const a = await merchantWithKey(s.app);
  const { c, link } = await linkSession(a.merchant);
  t.equal((await c.get("/dashboard/payments")).status, 200);
  const revoked = await admin("dashboard-link", "revoke", "--id", link.id);
  t.match(revoked, { id: link.id, merchant: a.merchant, revoked_at: String });
  const after = await c.get("/dashboard/payments");
  t.equal(after.status, 303, "signed out");
  t.match(after.headers.get("location"), /\/dashboard\/sign-in$/);

  const unused = await admin("dashboard-link", "--merchant", a.merchant, "--environment", "test");
  await admin("dashboard-link", "revoke", "--id", unused.id);
  const tried = await dashboardClient(s.base).exchange(unused.url.split("#token=")[1]);
  t.equal(tried.status, 401, "a revoked link cannot be used");
  const missing = await runCli("services/app/admin.ts", cliEnv, "dashboard-link", "revoke", "--id", "dlk_000000000000000000000000");
  t.equal(missing.code, 2);
  t.match(missing.stderr, /No dashboard link dlk_0+/);
});

t.test("dashboard-sessions list and revoke: one session, then all of a merchant's", async (t) => {
  const a = await merchantWithKey(s.app);
  const other = await merchantWithKey(s.app);
  const byKey = dashboardClient(s.base);
  t.equal((await byKey.signIn(a.key)).status, 303);
  const { c: byLink, link } = await linkSession(a.merchant);
  const theirs = dashboardClient(s.base);
  await theirs.signIn(other.key);

  const listed = await admin("dashboard-sessions", "list", "--merchant", a.merchant);
  t.equal(listed.length, 2, "the merchant's two sessions");
  t.same(listed.map((l: { via: string }) => l.via).sort(), ["api_key", "link"]);
  t.equal(listed.find((l: { via: string }) => l.via === "link")?.link_id, link.id);
  t.equal(listed.find((l: { via: string }) => l.via === "api_key")?.key_id, a.keyId);
  t.notMatch(JSON.stringify(listed), /dsh_/, "no session token listed");

  const one = listed.find((l: { via: string }) => l.via === "link").id;
  t.same(await admin("dashboard-sessions", "revoke", "--merchant", a.merchant, "--id", one), { merchant: a.merchant, revoked: [one] });
  t.equal((await byLink.get("/dashboard/payments")).status, 303, "that one is signed out");
  t.equal((await byKey.get("/dashboard/payments")).status, 200, "the other is not");

  const all = await admin("dashboard-sessions", "revoke", "--merchant", a.merchant);
  t.equal(all.revoked.length, 1);
  t.equal((await byKey.get("/dashboard/payments")).status, 303, "every session of the merchant ends");
  t.equal((await theirs.get("/dashboard/payments")).status, 200, "another merchant's session is untouched");
  t.same(await admin("dashboard-sessions", "list", "--merchant", a.merchant), [], "none open");
});

t.test("signing in again ends the browser's earlier session", async (t) => {
  const a = await merchantWithKey(s.app);
  const c = dashboardClient(s.base);
  await c.signIn(a.key);
  const first = c.session()!;
  await c.signIn(a.key);
  const second = c.session()!;
  t.not(second, first);
  t.equal((await c.get("/dashboard/payments")).status, 200, "the new one works");
  t.equal((await c.get("/dashboard/payments", { session: first })).status, 303, "the earlier one is over");
});

t.test("a signed-in browser that opens a link is asked first; only its own form, pressed, switches it", async (t) => {
  const a = await merchantWithKey(s.app);
  const b = await merchantWithKey(s.app);
  const c = dashboardClient(s.base);
  await c.signIn(a.key);
  const before = c.session()!;
  const link = await admin("dashboard-link", "--merchant", b.merchant, "--environment", "test");
  const token = link.url.split("#token=")[1];

  const page = await c.get("/dashboard/link");
  t.equal(page.status, 200);
  t.match(page.body, `You are signed in to ${a.merchant} (Test). Signing in here ends that session.`);
  t.match(page.body, /<form[^>]+id="link-form"[^>]+data-confirm="replace"/, "the script leaves this form for the merchant to send");
  t.match(page.body, /name="replace" value="1"/);

  const unasked = await c.post("/dashboard/link", { token }, { from: "/dashboard/link", csrf: true });
  // The page's form carries replace=1; a post without it (not the page's own) is refused.
  t.equal(unasked.status, 409, "without the page's confirmation: refused");
  t.equal(c.session(), before, "still the first session");
  t.match((await c.get("/dashboard/payments")).body, a.merchant, "still in the first shop");

  const asked = await c.post("/dashboard/link", { token, replace: "1" }, { from: "/dashboard/link" });
  t.equal(asked.status, 303);
  t.match((await c.get("/dashboard/payments")).body, b.merchant, "in the link's shop");
  t.equal((await c.get("/dashboard/payments", { session: before })).status, 303, "the first session ended");
});

t.test("on https the session cookie is __Host-: Secure, Path=/; on http a Live session's cookie is Secure", async (t) => {
  const https = await startTestApp(t, { DASHBOARD_BASE_URL: "https://shop-dashboard.example/dashboard", DASHBOARD_SIGN_IN_RATE_LIMIT_PER_MINUTE: "1000" });
  const a = await merchantWithKey(https.app);
  const page = await fetch(`${https.base}/dashboard/sign-in`);
  const pre = page.headers.getSetCookie().find((c) => c.startsWith("__Host-dashboard_sign_in="));
  t.ok(pre, "the sign-in cookie is a __Host- one");
  t.match(pre, /; Path=\/; HttpOnly; SameSite=Strict; Secure$/);
  const csrf = /name="csrf" value="([^"]+)"/.exec(await page.text())![1]!;
  const signed = await fetch(`${https.base}/dashboard/sign-in`, {
    method: "POST",
    redirect: "manual",
    headers: { "content-type": "application/x-www-form-urlencoded", cookie: pre!.split(";")[0]! },
    body: new URLSearchParams({ csrf, api_key: a.key }).toString(),
  });
  t.equal(signed.status, 303);
  const session = signed.headers.getSetCookie().find((c) => c.startsWith("__Host-dashboard_session=dsh_test_"));
  t.match(session, /; Path=\/; HttpOnly; SameSite=Strict; Secure$/, "the session cookie: __Host-, Secure, the whole host");

  const live = await merchantWithKey(s.app, "live", ["payment_intents:read"]);
  const c = dashboardClient(s.base);
  const res = await c.signIn(live.key);
  const cookie = res.headers.getSetCookie().find((l) => l.startsWith("dashboard_session=dsh_live_"));
  t.match(cookie, /; Secure$/, "a Live session's cookie is Secure on http too");
  const test = await dashboardClient(s.base).signIn((await merchantWithKey(s.app)).key);
  t.notMatch(test.headers.getSetCookie().find((l) => l.startsWith("dashboard_session=")), /Secure/, "a Test one on http is not (a developer's machine)");
});
