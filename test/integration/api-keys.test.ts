// API keys from the dashboard and the API (issue 64): a key created in the dashboard works on the
// API and its secret is never shown again (not in the list, not on a reload, not by the API);
// revoking it makes it fail with 401; nobody makes a key with a scope it lacks; last use shows
// after a call; a Test key never sees Live keys; a key does not revoke itself; no secret in the
// log. Real service and PostgreSQL, HTTP as a browser sends it (Chromium: dashboard-browser.test.ts).
import { Writable } from "node:stream";
import t from "tap";
import { pino } from "pino";
import { call, merchantWithKey, startTestApp, until } from "../helpers/harness.ts";
import { dashboardClient } from "../helpers/dashboard.ts";
import { KeyLastUse, lastUseEveryMs } from "../../services/auth/key-last-use.ts";

const logLines: string[] = [];
const logger = pino({ level: "debug" }, new Writable({ write(chunk, _enc, done) { logLines.push(String(chunk)); done(); } }));
const s = await startTestApp(t, { DASHBOARD_BASE_URL: "http://127.0.0.1/dashboard", DASHBOARD_SIGN_IN_RATE_LIMIT_PER_MINUTE: "1000" }, ["rpc", "gateway"], undefined, logger);
const keysOf = (merchant: string) => `/api/v1/merchants/${merchant}/api-keys`;
const secretPattern = /sk_(test|live)_[0-9A-Za-z]{32}/g;
/** One key's card on the dashboard's list. */
const itemOf = (page: string, id: string) => page.split("<li ").find((item) => item.includes(`data-key="${id}"`)) ?? "";

t.test("from the dashboard: created with chosen scopes, works on the API, its secret shown once; revoked, it is refused", async (t) => {
  const a = await merchantWithKey(s.app);
  const c = dashboardClient(s.base);
  await c.signIn(a.key);
  const page = await c.get("/dashboard/api-keys");
  t.equal(page.status, 200);
  t.match(page.body, /<a href="\/dashboard\/api-keys" aria-current="page">API keys<\/a>/, "in the navigation");
  t.match(page.body, /name="scopes" value="payment_intents:read"/, "a checkbox per scope the session holds");

  const created = await c.post("/dashboard/api-keys", { scopes: ["payment_intents:read", "webhooks:read"] }, { from: "/dashboard/api-keys" });
  t.equal(created.status, 200);
  t.equal(created.headers.get("cache-control"), "no-store", "the page with the secret is not cached");
  const secret = /<code class="hash" id="new-secret">(sk_test_[0-9A-Za-z]{32})<\/code>/.exec(created.body)?.[1];
  t.ok(secret, "the secret, once");
  t.match(created.body, /shown only this once/, "with a warning");
  t.match(created.body, /data-copy="sk_test_/, "and a copy button");

  const used = await call(s.base, "GET", `/api/v1/merchants/${a.merchant}/payment-intents`, { key: secret });
  t.equal(used.status, 200, "the new key works on the API");
  const denied = await call(s.base, "POST", `/api/v1/merchants/${a.merchant}/webhook-endpoints`, { key: secret, body: { url: "https://example.com/hook" } });
  t.equal(denied.body.error?.code, "insufficient_scope", "with the scopes chosen, no more");

  const reloaded = await c.get("/dashboard/api-keys");
  t.notMatch(reloaded.body, secret as string, "not on a reload");
  t.notMatch(reloaded.body.replace(secretPattern, (m) => (m === a.key ? "" : m)), secretPattern, "no secret at all on the list");
  const id = /<li class="key-item" data-key="(key_[0-9A-Za-z]+)"/.exec(reloaded.body)?.[1] as string;
  const listed = await call(s.base, "GET", keysOf(a.merchant), { key: a.key });
  t.equal(listed.status, 200);
  t.notMatch(JSON.stringify(listed.body), secretPattern, "the API lists no secret");
  t.notMatch(JSON.stringify(listed.body), /secret_hash|[0-9a-f]{64}/, "nor a hash");
  const mine = listed.body.data.find((k: { id: string }) => k.id === id);
  t.match(mine, { id, environment: "test", scopes: ["payment_intents:read", "webhooks:read"], revoked_at: null });
  t.equal(mine.hint, `${(secret as string).slice(0, 12)}…`, "its hint is its prefix");

  await until("its last use is recorded", async () => (await call(s.base, "GET", `${keysOf(a.merchant)}/${id}`, { key: a.key })).body.data.last_used_at, 10_000);
  const page2 = await c.get("/dashboard/api-keys");
  t.match(itemOf(page2.body, id), /class="last-used">\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC</, "the list shows its last use");

  const confirm = await c.get(`/dashboard/api-keys/${id}/revoke`);
  t.equal(confirm.status, 200);
  t.match(confirm.body, /cannot be undone/, "revoking asks first");
  const unconfirmed = await c.post(`/dashboard/api-keys/${id}/revoke`, {}, { from: `/dashboard/api-keys/${id}/revoke` });
  t.equal(unconfirmed.status, 400, "not without the confirmation");
  t.equal((await call(s.base, "GET", `/api/v1/merchants/${a.merchant}/payment-intents`, { key: secret })).status, 200, "still works");
  const revoked = await c.post(`/dashboard/api-keys/${id}/revoke`, { confirm: "1" }, { from: `/dashboard/api-keys/${id}/revoke` });
  t.equal(revoked.status, 303);
  t.match(revoked.headers.get("location"), /done=revoked/);
  const refused = await call(s.base, "GET", `/api/v1/merchants/${a.merchant}/payment-intents`, { key: secret });
  t.equal(refused.status, 401, "revoked: refused at once");
  t.equal(refused.body.error.code, "invalid_api_key");
  t.match(itemOf((await c.get("/dashboard/api-keys")).body, id), /data-status="revoked"[^]*Revoked/, "listed as revoked, with when");
});

t.test("by the API: create, get, list, revoke; scopes the caller lacks are refused and nothing is made", async (t) => {
  const a = await merchantWithKey(s.app, "test", ["payment_intents:read", "api_keys:read", "api_keys:write"]);
  const count = async () => (await call(s.base, "GET", keysOf(a.merchant), { key: a.key })).body.data.length as number;
  t.equal(await count(), 1);
  const over = await call(s.base, "POST", keysOf(a.merchant), { key: a.key, body: { scopes: ["payment_intents:read", "payment_intents:write"] } });
  t.equal(over.status, 403, "a scope it lacks");
  t.match(over.body.error, { code: "insufficient_scope", param: "scopes" });
  t.match(over.body.error.message, /payment_intents:write/, "named");
  t.ok(over.body.error.request_id, "in the error envelope");
  for (const [body, why] of [[{ scopes: [] }, "none"], [{ scopes: ["everything"] }, "an unknown one"], [{}, "not sent"], [{ scopes: ["payment_intents:read"], environment: "live" }, "an unknown field (the environment is the caller's)"]] as const) {
    const bad = await call(s.base, "POST", keysOf(a.merchant), { key: a.key, body });
    t.equal(bad.status, 400, why);
    t.equal(bad.body.error.code, "validation_failed", why);
  }
  t.equal(await count(), 1, "nothing was created");

  const made = await call(s.base, "POST", keysOf(a.merchant), { key: a.key, body: { scopes: ["api_keys:read", "payment_intents:read"] } });
  t.equal(made.status, 200);
  t.match(made.body.data, { environment: "test", scopes: ["api_keys:read", "payment_intents:read"] });
  t.match(made.body.data.api_key, /^sk_test_[0-9A-Za-z]{32}$/);
  const newKey = made.body.data.api_key as string;
  const got = await call(s.base, "GET", `${keysOf(a.merchant)}/${made.body.data.id}`, { key: a.key });
  t.notOk("api_key" in got.body.data, "a read has no secret");
  t.equal(got.body.data.last_used_at, null, "never used yet");
  t.equal((await call(s.base, "POST", keysOf(a.merchant), { key: newKey, body: { scopes: ["api_keys:read"] } })).body.error.code, "insufficient_scope", "without api_keys:write it creates none");

  const self = await call(s.base, "POST", `${keysOf(a.merchant)}/${a.keyId}/revoke`, { key: a.key });
  t.equal(self.status, 409, "a key does not revoke itself");
  t.equal(self.body.error.code, "invalid_state");
  const done = await call(s.base, "POST", `${keysOf(a.merchant)}/${made.body.data.id}/revoke`, { key: a.key });
  t.equal(done.status, 200);
  t.ok(done.body.data.revoked_at);
  t.equal((await call(s.base, "GET", keysOf(a.merchant), { key: newKey })).status, 401, "revoked: 401 at once");
  const again = await call(s.base, "POST", `${keysOf(a.merchant)}/${made.body.data.id}/revoke`, { key: a.key });
  t.equal(again.status, 200, "revoked already: answered unchanged");
  t.equal(again.body.data.revoked_at, done.body.data.revoked_at, "with the first revocation's time");
  t.equal((await call(s.base, "POST", `${keysOf(a.merchant)}/key_000000000000000000000000/revoke`, { key: a.key })).status, 404);
});

t.test("a Test key never sees Live keys, nor another merchant's", async (t) => {
  const live = await merchantWithKey(s.app, "live");
  const test = await merchantWithKey(s.app, "test", undefined, live.merchant);
  const other = await merchantWithKey(s.app);
  const listed = await call(s.base, "GET", keysOf(live.merchant), { key: test.key });
  t.same(listed.body.data.map((k: { id: string }) => k.id), [test.keyId], "only Test keys");
  t.equal((await call(s.base, "GET", `${keysOf(live.merchant)}/${live.keyId}`, { key: test.key })).status, 404, "a Live key is not found");
  t.equal((await call(s.base, "POST", `${keysOf(live.merchant)}/${live.keyId}/revoke`, { key: test.key })).status, 404, "nor revoked");
  t.equal((await call(s.base, "GET", `/api/v1/merchants/${live.merchant}/payment-intents`, { key: live.key })).status, 200, "which still works");
  t.equal((await call(s.base, "GET", `${keysOf(live.merchant)}/${other.keyId}`, { key: test.key })).status, 404, "another merchant's key is not found");
  t.equal((await call(s.base, "GET", keysOf(other.merchant), { key: test.key })).body.error.code, "merchant_mismatch");
  const liveMade = await call(s.base, "POST", keysOf(live.merchant), { key: live.key, body: { scopes: ["payment_intents:read"] } });
  t.match(liveMade.body.data.api_key, /^sk_live_/, "a Live key makes Live keys");
});

t.test("a session makes no key with more than it has; a read-only link's session sees keys and makes none", async (t) => {
  const a = await merchantWithKey(s.app, "test", ["payment_intents:read", "api_keys:read", "api_keys:write"]);
  const c = dashboardClient(s.base);
  await c.signIn(a.key);
  const page = await c.get("/dashboard/api-keys");
  t.notMatch(page.body, /value="webhooks:write"/, "only the scopes it holds are offered");
  t.match(page.body, /This session's key/, "its own key is not offered for revocation");
  const before = (await call(s.base, "GET", keysOf(a.merchant), { key: a.key })).body.data.length;
  const forged = await c.post("/dashboard/api-keys", { scopes: ["payment_intents:read", "webhooks:write"] }, { from: "/dashboard/api-keys" });
  t.equal(forged.status, 403, "a scope it lacks, sent anyway: refused");
  t.match(forged.body, /cannot give a scope it does not hold/);
  t.notMatch(forged.body, /id="new-secret"/);
  const none = await c.post("/dashboard/api-keys", {}, { from: "/dashboard/api-keys" });
  t.equal(none.status, 400, "none ticked");
  t.equal((await call(s.base, "GET", keysOf(a.merchant), { key: a.key })).body.data.length, before, "nothing was created");
  const self = await c.post(`/dashboard/api-keys/${a.keyId}/revoke`, { confirm: "1" }, { from: "/dashboard/api-keys" });
  t.equal(self.status, 409, "its own key: not revoked from its own session");

  const reader = await merchantWithKey(s.app, "test", ["payment_intents:read"]);
  const r = dashboardClient(s.base);
  await r.signIn(reader.key);
  t.notMatch((await r.get("/dashboard/payments")).body, /API keys/, "no api_keys:read: no link in the navigation");
  t.equal((await r.get("/dashboard/api-keys")).status, 403, "and the page names the scope");
  t.match((await r.get("/dashboard/api-keys")).body, /api_keys:read/);
  const lister = await merchantWithKey(s.app, "test", ["payment_intents:read", "api_keys:read"]);
  const l = dashboardClient(s.base);
  await l.signIn(lister.key);
  const readOnly = await l.get("/dashboard/api-keys");
  t.equal(readOnly.status, 200, "api_keys:read alone: the list");
  t.notMatch(readOnly.body, /id="create-key"|Revoke…/, "without a create form or revoke button");
  const tried = await l.post("/dashboard/api-keys", { scopes: "payment_intents:read" }, { from: "/dashboard/api-keys" });
  t.equal(tried.status, 403, "a create posted anyway is refused");
  t.match(tried.body, /api_keys:write/, "naming the scope it lacks");
});

t.test("last use is written at most once a minute per key, the later time winning", async (t) => {
  const a = await merchantWithKey(s.app);
  let clock = 0;
  const lastUse = new KeyLastUse(s.app.db, logger, { now: () => clock });
  const written = async () => {
    await lastUse.flush();
    const [row] = await s.app.db.em.fork().execute<{ last_used_at: Date | string }[]>(`select last_used_at from api_key_last_uses where api_key_id = ?`, [a.keyId]);
    return row === undefined ? undefined : new Date(row.last_used_at).getTime();
  };
  lastUse.seen(a.keyId);
  const first = await written();
  t.ok(first, "written after the call, by itself");
  await new Promise((resolve) => setTimeout(resolve, 20));
  clock += lastUseEveryMs - 1;
  for (let i = 0; i < 100; i++) lastUse.seen(a.keyId);
  t.equal(await written(), first, "within the minute: not written again, however many calls");
  clock += 1;
  lastUse.seen(a.keyId);
  lastUse.seen("key_000000000000000000000000");
  const second = await written();
  t.ok(second !== undefined && second > (first as number), "a minute on: written again");
  await s.app.db.em.fork().execute(`update api_key_last_uses set last_used_at = now() + interval '1 hour' where api_key_id = ?`, [a.keyId]);
  const later = await written();
  clock += lastUseEveryMs;
  lastUse.seen(a.keyId);
  t.equal(await written(), later, "another process's later time is kept");
});

t.test("no secret in the log", async (t) => {
  const joined = logLines.join("");
  t.notMatch(joined, secretPattern, "no API key secret in any log line");
});
