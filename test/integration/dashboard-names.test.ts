// The shop's name where people look for it (issue 64): the dashboard's header names the merchant
// (admin merchant create --name) beside its id, and the checkout page says whom the shopper pays;
// the dashboard shows only the sections a session may read, and a refusal names the scope missing.
// Real service and PostgreSQL, HTTP as a browser sends it.
import t from "tap";
import { createApiKey, createMerchant } from "../../services/auth/admin.ts";
import { call, idemKey, sampleIntent, startTestApp } from "../helpers/harness.ts";
import { dashboardClient } from "../helpers/dashboard.ts";
import { reportEthereumOutput } from "../helpers/lifecycle.ts";

// RATE_SOURCES=fixed: Test intents priced in a currency are quoted offline (built-in rates).
const s = await startTestApp(t, { DASHBOARD_BASE_URL: "http://127.0.0.1/dashboard", CHECKOUT_BASE_URL: "http://127.0.0.1/checkout", DASHBOARD_SIGN_IN_RATE_LIMIT_PER_MINUTE: "1000", RATE_SOURCES: "fixed" });
const em = () => s.app.db.em.fork();
const shop = await createMerchant(em(), "Ana's Bakery & Café");
const full = await createApiKey(em(), shop.id, "test", ["payment_intents:read", "payment_intents:write", "webhooks:read", "webhooks:write", "merchant:readiness"]);
const reader = await createApiKey(em(), shop.id, "test", ["payment_intents:read"]);

t.test("the dashboard's header names the shop, escaped, beside its id", async (t) => {
  const c = dashboardClient(s.base);
  t.equal((await c.signIn(full.api_key)).status, 303);
  const page = (await c.get("/dashboard/payments")).body;
  const header = page.slice(page.indexOf('<header class="top">'), page.indexOf("</header>"));
  t.match(header, "<strong>Ana&#39;s Bakery &amp; Café</strong>", "the name, HTML-escaped");
  t.match(header, `<code>${shop.id}</code>`, "and the id");
  for (const section of ["Payments", "Webhooks", "Go-live readiness"]) t.match(header, `>${section}</a>`, `${section} in the navigation`);
});

t.test("the checkout page says whom the shopper pays", async (t) => {
  const res = await call(s.base, "POST", `/api/v1/merchants/${shop.id}/payment-intents`, { key: full.api_key, idempotencyKey: idemKey(), body: sampleIntent });
  const page = await fetch(`${s.base}/checkout/${res.body.data.public_id}`);
  const html = await page.text();
  t.equal(page.status, 200);
  t.match(html, '<h1 class="title">Pay Ana&#39;s Bakery &amp; Café</h1>');
  t.match(html, /<title>[^<]* to Ana&#39;s Bakery &amp; Café<\/title>/);
});

t.test("a session sees only the sections it may read, and a refusal names the scope it lacks", async (t) => {
  const c = dashboardClient(s.base);
  await c.signIn(reader.api_key);
  const page = (await c.get("/dashboard/payments")).body;
  const header = page.slice(page.indexOf('<header class="top">'), page.indexOf("</header>"));
  t.match(header, ">Payments</a>");
  t.notMatch(header, ">Webhooks</a>", "no Webhooks without webhooks:read");
  t.notMatch(header, ">Go-live readiness</a>", "no readiness without merchant:readiness");
  const refused = await c.get("/dashboard/readiness");
  t.equal(refused.status, 403);
  t.match(refused.body, "it needs the merchant:readiness scope, which its key or link does not have");
});

t.test("GET / goes to the dashboard, and /favicon.ico is an icon: no JSON 404 for a browser's first request", async (t) => {
  const root = await fetch(`${s.base}/`, { redirect: "manual" });
  t.equal(root.status, 302);
  t.equal(root.headers.get("location"), "http://127.0.0.1/dashboard", "DASHBOARD_BASE_URL");
  const icon = await fetch(`${s.base}/favicon.ico`);
  t.equal(icon.status, 200);
  t.equal(icon.headers.get("content-type"), "image/svg+xml");
  t.match(await icon.text(), /^<svg /);
  const other = await fetch(`${s.base}/nothing-here`);
  t.equal(other.status, 404, "any other path is the API's 404 as before");
  t.equal(((await other.json()) as { error: { code: string } }).error.code, "route_not_found");
});

t.test("a payment created from the dashboard: in the asset or priced in a currency, through the API's own create, its checkout link to copy", async (t) => {
  const c = dashboardClient(s.base);
  await c.signIn(full.api_key);
  const list = (await c.get("/dashboard/payments")).body;
  t.match(list, /href="\/dashboard\/payments\/new" id="new-payment">New payment</, "the way to it on the payments page");
  const form = await c.get("/dashboard/payments/new");
  t.equal(form.status, 200);
  const idem = /name="idem" value="([^"]+)"/.exec(form.body)![1]!;
  const made = await c.post("/dashboard/payments/new", { idem, amount: "12.50", currency: "", pair: "ethereum:USDC", reference: "order-77" }, { from: "/dashboard/payments/new" });
  t.equal(made.status, 303);
  const id = /\/dashboard\/payments\/(pi_[0-9A-Za-z]+)\?done=created/.exec(made.headers.get("location") ?? "")?.[1];
  t.ok(id, "to the new payment's page");
  const api = await call(s.base, "GET", `/api/v1/merchants/${shop.id}/payment-intents/${id}`, { key: full.api_key });
  t.match(api.body.data, { requested_amount: "12.50", asset: "USDC", network: "ethereum", merchant_reference: "order-77", status: "pending" }, "as the API shows it");
  const page = (await c.get(`/dashboard/payments/${id}?done=created`)).body;
  t.match(page, "Payment created: send the shopper its checkout page");
  t.match(page, new RegExp(`data-copy="${api.body.data.checkout_url}"[^>]*>Copy link`), "its checkout link, to copy");
  const again = await c.post("/dashboard/payments/new", { idem, amount: "12.50", currency: "", pair: "ethereum:USDC", reference: "order-77" }, { from: "/dashboard/payments/new" });
  t.match(again.headers.get("location"), id!, "the same form sent twice: the same payment (its Idempotency-Key)");

  const bad = await c.post("/dashboard/payments/new", { idem: `dash-${"z".repeat(24)}`, amount: "12.1234567", currency: "", pair: "ethereum:USDC", reference: "" }, { from: "/dashboard/payments/new" });
  t.equal(bad.status, 400, `what the API refuses comes back on the form (${bad.status} ${bad.body.slice(bad.body.indexOf("<main"), bad.body.indexOf("<main") + 400)})`);
  t.match(bad.body, /requested_amount|decimal places/);
  t.match(bad.body, 'value="12.1234567"', "with what was typed");

  const fiat = await c.post("/dashboard/payments/new", { idem: `dash-${"y".repeat(24)}`, amount: "19.99", currency: "USD", pair: "ethereum:ETH", reference: "" }, { from: "/dashboard/payments/new" });
  t.equal(fiat.status, 303, "priced in USD");
  const fiatId = /(pi_[0-9A-Za-z]+)/.exec(fiat.headers.get("location") ?? "")![1]!;
  const priced = (await call(s.base, "GET", `/api/v1/merchants/${shop.id}/payment-intents/${fiatId}`, { key: full.api_key })).body.data;
  t.match(priced, { price_amount: "19.99", price_currency: "USD", asset: "ETH" });
  const row = (await c.get("/dashboard/payments")).body.split("<tr>").find((r) => r.includes(`>${fiatId}</a>`)) ?? "";
  t.match(row, `19.99 USD<br><span class="help">${priced.requested_amount} ETH</span>`, "the list shows the sale's price, the crypto amount beneath");

  const reader = dashboardClient(s.base);
  await reader.signIn((await createApiKey(em(), shop.id, "test", ["payment_intents:read"])).api_key);
  t.notMatch((await reader.get("/dashboard/payments")).body, /New payment/, "not offered without payment_intents:write");
});

t.test("a transaction's hash links to its network's explorer (Test: Sepolia's), a simulated one says so", async (t) => {
  const c = dashboardClient(s.base);
  await c.signIn(full.api_key);
  const make = async () => (await call(s.base, "POST", `/api/v1/merchants/${shop.id}/payment-intents`, { key: full.api_key, idempotencyKey: idemKey(), body: sampleIntent })).body.data;
  const simulated = await make();
  await call(s.base, "POST", `/api/v1/sandbox/merchants/${shop.id}/payment-intents/${simulated.public_id}/simulate`, { key: full.api_key, body: { outcome: "underpaid" } });
  const simPage = (await c.get(`/dashboard/payments/${simulated.public_id}`)).body;
  t.match(simPage, /<td data-label="Transaction"><code class="hash">0x[0-9a-f]{64}<\/code> <span class="help">\(simulated\)<\/span><\/td>/, "the sandbox's: no link, said to be simulated, no :0");

  const real = await make();
  const txHash = await reportEthereumOutput(s.app, s.rpcUrl, "dashboard-explorer-watcher", { toAddress: real.deposit_address, asset: "USDC", amount: "1" });
  const page = (await c.get(`/dashboard/payments/${real.public_id}`)).body;
  t.match(page, `<a href="https://sepolia.etherscan.io/tx/${txHash}" rel="noreferrer noopener" target="_blank"><code class="hash">${txHash}</code></a>`, "linked to the Test network's explorer");
  t.notMatch(page, `${txHash}:0`, "the hash alone");
});

t.test("readiness in Test says Test is what was checked, and what Live still needs", async (t) => {
  const c = dashboardClient(s.base);
  await c.signIn(full.api_key);
  const page = (await c.get("/dashboard/readiness")).body;
  const said = /<p id="ready">([^<]*)<\/p>/.exec(page)?.[1] ?? "";
  t.notMatch(said, /Ready to go live/, "never \"ready to go live\" from Test");
  t.match(said, /Live is checked on its own/);
});
