// The public QR configuration route over the REST gateway: public facts only (an exact key
// snapshot), 404 for unknown, disabled and malformed ids (malformed ones without a query),
// labels returned as data, the per-address rate limit, and the admin CLI end to end.
import { setTimeout as sleep } from "node:timers/promises";
import t from "tap";
import { createMerchant } from "../../services/auth/admin.ts";
import { assets } from "../../services/vocabulary/assets.ts";
import { newId } from "../../services/platform/ids.ts";
import { createQrConfiguration, disableQrConfiguration } from "../../services/qr/admin.ts";
import { call, merchantWithKey, startTestApp } from "../helpers/harness.ts";
import { runCli } from "../helpers/processes.ts";

/** Every key the route may return, and of each accepted pair; nothing else, ever. */
const publicKeys = ["accepted", "amount", "environment", "label", "merchant_display_name", "qr_public_id"];
const pairKeys = ["asset", "network"];
const everyPair = assets.map((a) => ({ network: a.network, asset: a.asset }));

// A roomy limit here; the limit itself is tested on an app of its own below.
const s = await startTestApp(t, { PUBLIC_RATE_LIMIT_PER_MINUTE: "1000" }, ["rpc", "gateway"]);
const em = () => s.app.db.em.fork();
const merchant = await createMerchant(em(), "Corner Café & Co");
const get = (id: string, headers: Record<string, string> = {}) => call(s.base, "GET", `/api/v1/qr/${id}`, { headers });

function snapshot(t: Pick<typeof import("tap"), "same">, body: { data: Record<string, unknown> }) {
  t.same(Object.keys(body).sort(), ["data"], "only the data envelope");
  t.same(Object.keys(body.data).sort(), publicKeys, "exactly the public keys");
  for (const pair of body.data.accepted as Record<string, unknown>[]) t.same(Object.keys(pair).sort(), pairKeys, "each pair: network and asset only");
}

t.test("success: public facts only, in both environments, without a credential", async (t) => {
  const open = await createQrConfiguration(em(), { merchantId: merchant.id, environment: "test", label: "  Counter 1  " });
  t.match(open.qr_public_id, /^qr_[0-9A-Za-z]{24}$/);
  const res = await get(open.qr_public_id);
  t.equal(res.status, 200, JSON.stringify(res.body));
  t.match(res.headers.get("content-type"), /^application\/json/);
  t.ok(res.headers.get("x-request-id"));
  snapshot(t, res.body);
  t.same(res.body.data, {
    qr_public_id: open.qr_public_id,
    label: "Counter 1",
    merchant_display_name: "Corner Café & Co",
    environment: "test",
    accepted: everyPair,
    amount: null,
  }, "no network: every supported pair; no fixed amount: amount is null (the encoder shows unset optional fields as null)");
  t.notOk(JSON.stringify(res.body).includes(merchant.id), "the merchant's id appears nowhere");

  const live = await createQrConfiguration(em(), { merchantId: merchant.id, environment: "live", label: "Till", network: "ethereum" });
  const liveRes = await get(live.qr_public_id);
  snapshot(t, liveRes.body);
  t.equal(liveRes.body.data.environment, "live");
  t.same(liveRes.body.data.accepted, everyPair.filter((p) => p.network === "ethereum"), "a network alone: its pairs");
  t.equal(liveRes.body.data.amount, null);

  const fixed = await createQrConfiguration(em(), { merchantId: merchant.id, environment: "test", label: "Coffee", network: "tron", asset: "USDT", amount: "3.50" });
  const fixedRes = await get(fixed.qr_public_id);
  snapshot(t, fixedRes.body);
  t.same(fixedRes.body.data.accepted, [{ network: "tron", asset: "USDT" }]);
  t.equal(fixedRes.body.data.amount, "3.50", "a fixed amount: the decimal string as given");

  // No credential is needed, and one given is ignored: the answer is the same, nothing merchant-only is added.
  const apiKey = await merchantWithKey(s.app, "test", undefined, merchant.id);
  for (const authorization of [`Bearer ${apiKey.key}`, "Bearer sk_test_nonsense", "Basic Zm9vOmJhcg==", "garbage"]) {
    const withAuth = await get(open.qr_public_id, { authorization });
    t.equal(withAuth.status, 200, `Authorization "${authorization.slice(0, 16)}…" is ignored`);
    t.same(withAuth.body, res.body);
  }
});

t.test("HTML in a label comes back as the same JSON string", async (t) => {
  const label = `<script>alert("x")</script><img src=x onerror=alert(1)> & 'q'`;
  const qr = await createQrConfiguration(em(), { merchantId: merchant.id, environment: "test", label });
  const res = await fetch(`${s.base}/api/v1/qr/${qr.qr_public_id}`);
  t.equal(res.status, 200);
  t.equal(res.headers.get("content-type"), "application/json; charset=utf-8");
  const text = await res.text();
  t.equal(JSON.parse(text).data.label, label, "the label unchanged: JSON is data; pages showing it escape it");
  t.ok(text.includes(JSON.stringify(label)), "encoded by JSON rules only");
});

t.test("unknown and disabled ids are 404 not_found", async (t) => {
  const unknown = await get(newId("qr"));
  t.equal(unknown.status, 404);
  t.match(unknown.body, { error: { code: "not_found", param: "qr_public_id", request_id: String } });

  const qr = await createQrConfiguration(em(), { merchantId: merchant.id, environment: "live", label: "Old till" });
  t.equal((await get(qr.qr_public_id)).status, 200, "active");
  const disabled = await disableQrConfiguration(em(), qr.qr_public_id);
  const again = await disableQrConfiguration(em(), qr.qr_public_id);
  t.equal(again.disabled_at, disabled.disabled_at, "disabling twice keeps the first time");
  const gone = await get(qr.qr_public_id);
  t.equal(gone.status, 404, "disabled: at once");
  t.same({ ...gone.body.error, request_id: "" }, { ...unknown.body.error, request_id: "" }, "the same answer as an unknown id");
});

t.test("malformed ids are 404, and never reach the database", async (t) => {
  // Count the statements the app's connection runs (roles rpc + gateway only: nothing runs in the background).
  const connection = s.app.db.em.getConnection();
  const execute = connection.execute.bind(connection);
  let statements = 0;
  connection.execute = ((...args: Parameters<typeof execute>) => {
    statements++;
    return execute(...args);
  }) as typeof connection.execute;
  t.teardown(() => {
    connection.execute = execute;
  });

  const cases: [string, string][] = [
    ["%3Cscript%3Ealert(1)%3C%2Fscript%3E", "markup"],
    ["qr_aaaaaaaaaaaaaaaaaaaaaaa%00", "%00"],
    ["%00", "%00 alone"],
    [`qr_${"a".repeat(1021)}`, "1 KB"],
    ["x".repeat(1024), "1 KB of anything"],
    [`qr_${"a".repeat(23)}`, "qr_ + 23 characters"],
    [`qr_${"a".repeat(25)}`, "qr_ + 25 characters"],
    [`qr_${"a".repeat(22)}%C3%A9`, "a non-ASCII character"],
    [`qr_${"a".repeat(23)}'`, "a quote"],
    ["qr_%2F..%2F..%2Fetc%2Fpasswd", "an encoded slash"],
    ["%ZZ", "malformed percent-encoding"],
    [`QR_${"a".repeat(24)}`, "upper-case prefix"],
  ];
  for (const [id, what] of cases) {
    const res = await get(id);
    t.equal(res.status, 404, `${what}: 404`);
    t.match(res.headers.get("content-type"), /^application\/json/, `${what}: JSON`);
    t.same(Object.keys(res.body), ["error"], `${what}: an error envelope only`);
    t.ok(["not_found", "route_not_found"].includes(res.body.error.code), `${what}: ${res.body.error.code}`);
  }
  t.equal(statements, 0, "no statement for any malformed id");

  // The control: a well-formed id is looked up, so the count above could have seen it.
  await get(newId("qr"));
  t.ok(statements >= 1, `a well-formed unknown id runs a query (${statements})`);
});

t.test("rate limit: per client address, on the QR route only", async (t) => {
  const limited = await startTestApp(t, { PUBLIC_RATE_LIMIT_PER_MINUTE: "5" }, ["rpc", "gateway"]);
  const owner = await merchantWithKey(limited.app);
  const qr = await createQrConfiguration(limited.app.db.em.fork(), { merchantId: owner.merchant, environment: "test", label: "Limited" });
  // The limit counts in fixed minutes: start well inside one, so six calls share it.
  const left = 60_000 - (Date.now() % 60_000);
  if (left < 5_000) await sleep(left + 100);

  for (let i = 1; i <= 5; i++) t.equal((await call(limited.base, "GET", `/api/v1/qr/${qr.qr_public_id}`)).status, 200, `call ${i}`);
  const sixth = await call(limited.base, "GET", `/api/v1/qr/${qr.qr_public_id}`);
  t.equal(sixth.status, 429, "the 6th call in the minute");
  t.match(sixth.body, { error: { code: "rate_limited", request_id: String } });
  const retryAfter = sixth.headers.get("retry-after") ?? "";
  t.match(retryAfter, /^[1-9][0-9]*$/, `Retry-After in whole seconds (${retryAfter})`);
  t.ok(Number(retryAfter) >= 1 && Number(retryAfter) <= 60, "at most the rest of the minute");
  t.equal((await call(limited.base, "GET", `/api/v1/qr/${newId("qr")}`)).status, 429, "any QR id from that address");
  t.equal((await call(limited.base, "GET", `/api/v1/qr/${qr.qr_public_id}`, { key: owner.key })).status, 429, "a credential does not lift it");

  for (let i = 1; i <= 7; i++) {
    const list = await call(limited.base, "GET", `/api/v1/merchants/${owner.merchant}/payment-intents`, { key: owner.key });
    t.equal(list.status, 200, `merchant route call ${i}: not limited`);
  }
  t.equal((await call(limited.base, "GET", "/api/v1/nothing-here")).status, 404, "an unknown route is not limited either");
});

const admin = (env: Record<string, string>, ...args: string[]) => runCli("services/app/admin.ts", env, ...args);

t.test("the admin CLI: qr create and disable", async (t) => {
  const env = { DATABASE_URL: s.databaseUrl };
  const created = await admin(env, "qr", "create", "--merchant", merchant.id, "--environment", "live", "--label", "Window <b>", "--network", "ethereum", "--asset", "USDC", "--amount", "12.5");
  t.equal(created.code, 0, created.stderr);
  const out = JSON.parse(created.stdout);
  t.match(out, { qr_public_id: /^qr_[0-9A-Za-z]{24}$/, merchant: merchant.id, environment: "live", label: "Window <b>", accepted: [{ network: "ethereum", asset: "USDC" }], amount: "12.5", created_at: String });
  const res = await get(out.qr_public_id);
  snapshot(t, res.body);
  t.same(res.body.data, { qr_public_id: out.qr_public_id, label: "Window <b>", merchant_display_name: merchant.name, environment: "live", accepted: [{ network: "ethereum", asset: "USDC" }], amount: "12.5" });

  const disabled = await admin(env, "qr", "disable", "--id", out.qr_public_id);
  t.equal(disabled.code, 0, disabled.stderr);
  t.match(JSON.parse(disabled.stdout), { qr_public_id: out.qr_public_id, disabled_at: String });
  t.equal((await get(out.qr_public_id)).status, 404, "disabled through the CLI");

  // Checked before the database starts: an unreachable DATABASE_URL is never reached.
  const nowhere = { DATABASE_URL: "postgres://postgres@127.0.0.1:1/nowhere" };
  const badAmount = await admin(nowhere, "qr", "create", "--merchant", merchant.id, "--environment", "test", "--label", "X", "--network", "ethereum", "--asset", "USDC", "--amount", "1.1234567");
  t.equal(badAmount.code, 2, "exit 2");
  t.equal(badAmount.stderr, "admin: --amount has more than 6 decimal places, the most this asset allows\n", "one stderr line");
  t.equal(badAmount.stdout, "");

  const noMerchant = await admin(env, "qr", "create", "--merchant", "mer_nobody", "--environment", "test", "--label", "X");
  t.equal(noMerchant.code, 2, "exit 2");
  t.equal(noMerchant.stderr, "admin: no merchant mer_nobody\n", "one stderr line");
  const [row] = await em().execute<{ n: number }[]>(`select count(*)::int as n from qr_configurations where merchant_id = 'mer_nobody'`);
  t.equal(row?.n, 0, "nothing stored");
});
