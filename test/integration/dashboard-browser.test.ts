// The merchant dashboard in Chromium (playwright-core with Debian's chromium; skipped without it),
// on the real app with a webhook receiver: sign in with a key; find an intent made through the API
// by its reference and its deposit address, read its timeline, cancel it; create an endpoint and
// see its secret once; send a test event and see its delivery and attempt; replay a failed
// delivery; create an API key with a chosen scope, see its secret once, revoke it after asking; a
// read-only link sees no action button. Statuses are pills with their word, the timeline reads as
// sentences, an exception says what to do, a delivery's attempts open on demand. Every page passes
// axe-core with no serious or critical violation at desktop width and at 390 px, where nothing
// scrolls sideways, and is screenshotted whole at both (.tap/screenshots/dashboard-*.png).
import path from "node:path";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { chromium, type Browser, type Page } from "playwright-core";
import t from "tap";
import { axeViolations, executablePath, noBrowser, screenshotsDir } from "../helpers/browser.ts";
import { AdminService } from "../../gen/payments/v1/admin_pb.ts";
import { createInternalCredential } from "../../services/auth/admin.ts";
import { call, idemKey, merchantWithKey, sampleIntent, until } from "../helpers/harness.ts";
import { finished, waitForDelivery, webhookSetup } from "../helpers/webhooks.ts";

const shots = screenshotsDir();

// The receiver answers 500 on /fail, 200 elsewhere: a delivery there fails for good after two attempts.
const s = await webhookSetup(t, {
  env: { DASHBOARD_BASE_URL: "http://127.0.0.1/dashboard", WEBHOOK_MAX_ATTEMPTS: "2", DASHBOARD_SIGN_IN_RATE_LIMIT_PER_MINUTE: "1000" },
  respond: (req) => (req.url.startsWith("/fail") ? { status: 500, body: "receiver is down" } : { status: 200, body: "ok" }),
});
const { base, creds } = s;
const dash = `${base}/dashboard`;

async function createIntent(body: Record<string, unknown>) {
  const res = await call(base, "POST", `/api/v1/merchants/${creds.merchant}/payment-intents`, { key: creds.key, idempotencyKey: idemKey(), body });
  if (res.status !== 200) throw new Error(`create: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data;
}


/** What scrolls sideways now: the document itself, or any element whose content is wider than its box. */
const sideways = `(() => {
  const wide = [...document.querySelectorAll("body *")].filter((el) => {
    const x = getComputedStyle(el).overflowX;
    return (x === "auto" || x === "scroll") && el.scrollWidth > el.clientWidth + 1;
  }).map((el) => el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") + (el.className ? "." + String(el.className).replace(/ +/g, ".") : ""));
  return document.documentElement.scrollWidth > window.innerWidth ? ["the page", ...wide] : wide;
})()`;

const sizes = [
  ["desktop", { width: 1280, height: 900 }],
  ["phone", { width: 390, height: 844 }],
] as const;

/**
 * Checks a page as it is now at desktop width and at 390 px: no serious or critical axe violation
 * at either, nothing scrolling sideways on the phone; a full-page screenshot of each (.tap/screenshots/).
 */
async function check(t: { same: (found: unknown, wanted: unknown, message: string) => unknown }, page: Page, name: string): Promise<void> {
  for (const [size, viewport] of sizes) {
    await page.setViewportSize(viewport);
    t.same(await axeViolations(page), [], `${name} (${size}): no serious or critical accessibility violation`);
    if (size === "phone") t.same(await page.evaluate(sideways), [], `${name} (390 px): nothing scrolls sideways`);
    await page.screenshot({ path: path.join(shots, `dashboard-${name}-${size}.png`), fullPage: true });
  }
  await page.setViewportSize(sizes[0][1]);
}

async function newPage(browser: Browser, cspErrors: string[]): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, locale: "en-US" });
  const page = await context.newPage();
  page.on("console", (msg) => {
    if (/Content[- ]Security[- ]Policy|Refused to/i.test(msg.text())) cspErrors.push(msg.text());
  });
  page.on("pageerror", (err) => cspErrors.push(err.message));
  return page;
}

t.test("a merchant's day in the dashboard", { skip: noBrowser }, async (t) => {
  const browser = await chromium.launch({ executablePath, args: ["--no-sandbox"] });
  t.teardown(() => browser.close());
  const problems: string[] = [];
  const page = await newPage(browser, problems);

  // Sign in with a key.
  await page.goto(dash);
  t.equal(new URL(page.url()).pathname, "/dashboard/sign-in", "signed out: the sign-in page");
  await check(t, page, "sign-in");
  await page.getByLabel("API key").fill(creds.key);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL(`${dash}/payments`);
  t.match(await page.locator("header").textContent(), "Test mode", "the environment on every page");
  t.match(await page.locator("header").textContent(), "Test Shop", "and the shop's name");

  // An intent made through the API appears, found by its reference and by its deposit address.
  const reference = `order-${Date.now()}`;
  const pi = await createIntent({ ...sampleIntent, merchant_reference: reference });
  const other = await createIntent(sampleIntent);
  await page.goto(`${dash}/payments`);
  t.ok(await page.locator("#payments").getByRole("link", { name: pi.public_id }).isVisible(), "in the list");
  await check(t, page, "payments");
  await page.getByLabel("Merchant reference").fill(reference);
  await page.getByRole("button", { name: "Find" }).click();
  await page.waitForURL(/reference=/);
  t.equal(await page.locator("#payments tbody tr").count(), 1, "by reference: that one");
  t.match(await page.locator("#payments").textContent(), pi.public_id);
  await page.getByLabel("Merchant reference").fill("");
  await page.getByLabel("Deposit address or transaction hash").fill(pi.deposit_address);
  await page.getByRole("button", { name: "Find" }).click();
  await page.waitForURL(/search=/);
  t.equal(await page.locator("#payments tbody tr").count(), 1, "by deposit address: that one");
  t.notMatch(await page.locator("#payments").textContent(), other.public_id);

  // Its page: the timeline with the payload, then cancel.
  await page.locator("#payments").getByRole("link", { name: pi.public_id }).click();
  await page.waitForURL(`${dash}/payments/${pi.public_id}`);
  t.match(await page.locator("#timeline .step-text").first().textContent(), /^Payment created: .+ on /, "the timeline reads as sentences");
  const raw = page.locator("#timeline pre").first();
  t.notOk(await raw.isVisible(), "the raw event is folded");
  await page.locator("#timeline details summary").first().click();
  t.ok(await raw.isVisible(), "and opens on demand");
  t.match(await raw.textContent(), pi.public_id, "with its payload");
  t.match(await page.locator("#timeline summary").first().textContent(), "payment.intent.created", "named by its type");
  t.equal(await page.locator("#intent-status").textContent(), "pending", "the status pill says its word");
  t.match(await page.locator("#intent-status").getAttribute("class"), "pill-info", "on its tint");
  await check(t, page, "payment");
  await page.getByRole("button", { name: "Cancel payment" }).click();
  await page.waitForURL(/done=cancelled/);
  t.equal(await page.locator("#intent-status").textContent(), "cancelled");
  const after = await call(base, "GET", `/api/v1/merchants/${creds.merchant}/payment-intents/${pi.public_id}`, { key: creds.key });
  t.equal(after.body.data.status, "cancelled", "the API answers cancelled");
  t.equal(await page.getByRole("button", { name: "Cancel payment" }).count(), 0, "no cancel button once cancelled");

  // An endpoint made in the browser: its secret once, never again.
  await page.goto(`${dash}/webhooks`);
  await page.getByLabel("Endpoint URL").fill(`https://hooks.example.test/dash`);
  await page.getByLabel("Description (optional)").fill("from the dashboard");
  await page.getByRole("button", { name: "Add endpoint" }).click();
  const secret = ((await page.locator("#signing-secret").textContent()) ?? "").trim();
  t.match(secret, /^whsec_/, "the signing secret is shown");
  t.ok(await page.getByRole("button", { name: "Copy secret" }).isVisible(), "with a copy button");
  await check(t, page, "endpoint-created");
  await page.getByRole("link", { name: "Open the endpoint" }).click();
  await page.waitForURL(/\/dashboard\/webhooks\/we_/);
  const endpointUrl = page.url();
  t.notMatch(await page.content(), secret, "not on the endpoint's page");
  await page.goto(`${dash}/webhooks`);
  t.notMatch(await page.content(), secret, "nor on the list");
  t.notMatch(JSON.stringify((await call(base, "GET", `/api/v1/merchants/${creds.merchant}/webhook-endpoints`, { key: creds.key })).body), secret, "nor in the API");
  await check(t, page, "webhooks");

  // Send test: it reaches the receiver, and its delivery and attempt appear.
  await page.goto(endpointUrl);
  await page.getByRole("button", { name: "Send test event" }).click();
  await page.waitForURL(/done=tested/);
  await until("the test event at the receiver", async () => s.receiver.requests.find((r) => r.url === "/dash" && r.body.toString().includes("webhook.test")), 15_000);
  const delivered = await until(
    "the test delivery delivered on the page",
    async () => {
      await page.reload();
      const item = page.locator(`.delivery[data-status="delivered"]`);
      return (await item.count()) > 0 ? item.first() : undefined;
    },
    15_000,
  );
  t.match(await delivered.locator(".delivery-line").textContent(), /webhook\.test\s+delivered\s+HTTP 200\s+to https:\/\/hooks\.example\.test\/dash/, "one line: event, status, code, endpoint");
  t.equal(await delivered.locator(".delivery-line .pill").textContent(), "delivered", "the status pill says its word");
  const attempt = delivered.locator(".attempt").first();
  t.notOk(await attempt.isVisible(), "the attempts are folded");
  await delivered.getByText("Attempts (1)").click();
  t.ok(await attempt.isVisible(), "and open on demand");
  t.match(await attempt.textContent(), /Attempt 1, .*success\s+HTTP 200 in \d+ ms/, "the attempt: outcome, code, duration");
  await check(t, page, "endpoint");
  // A delivered delivery is replayed too, as the API allows.
  await delivered.getByRole("button", { name: "Replay" }).click();
  await page.waitForURL(/done=replayed/);
  t.equal(await page.locator(`.delivery[data-status="delivered"]`).first().getByRole("button", { name: /Replay/ }).count(), 1, "a delivered delivery offers Replay");

  // A failed delivery, replayed from the dashboard.
  const failing = await s.createEndpoint("/fail");
  const test = await call(base, "POST", `/api/v1/merchants/${creds.merchant}/webhook-endpoints/${failing.id}/test`, { key: creds.key });
  const failed = await waitForDelivery(s, test.body.data.id, finished);
  t.equal(failed.status, "failed");
  await page.goto(`${dash}/webhooks/${failing.id}`);
  const item = page.locator(`.delivery[data-delivery="${failed.id}"]`);
  t.match(await item.textContent(), "receiver is down", "the response excerpt");
  t.equal(await item.locator(".delivery-line .pill-bad").textContent(), "failed", "a failed delivery's pill");
  t.match(await item.locator(".delivery-line").textContent(), "HTTP 500");
  await item.getByRole("button", { name: "Replay" }).click();
  await page.waitForURL(/done=replayed/);
  const replay = await until("the replay", async () => {
    const list = await call(base, "GET", `/api/v1/merchants/${creds.merchant}/webhook-deliveries?endpoint_id=${failing.id}`, { key: creds.key });
    return list.body.data.find((d: { replay_of?: string }) => d.replay_of === failed.id);
  }, 10_000);
  t.ok(await page.locator(`.delivery[data-delivery="${replay.id}"]`).count(), "the new delivery is listed");
  const original = page.locator(`.delivery[data-delivery="${failed.id}"]`);
  t.match(await original.textContent(), `Replayed as ${replay.id}`, "the original says by which delivery it was replayed");
  t.equal(await original.getByRole("button", { name: "Replay again" }).count(), 1, "and offers to replay it again, so named");
  await page.goto(`${dash}/deliveries?event=${failed.event_id}`);
  t.equal(await page.locator(".delivery").count(), 2, "per event: the delivery and its replay");
  await check(t, page, "deliveries");

  // Disable and enable again, with the disabled banner between.
  await page.goto(`${dash}/webhooks/${failing.id}`);
  await page.getByRole("button", { name: "Disable endpoint" }).click();
  await page.waitForURL(/done=disabled/);
  t.match(await page.locator("#disabled-banner").textContent(), "To recover");
  await page.getByRole("button", { name: "Enable endpoint" }).click();
  await page.waitForURL(/done=enabled/);
  t.match(await page.locator("#endpoint-status").textContent(), "enabled");

  // An underpaid payment (the sandbox's): its step in words, and what to do next, on its page and in the list.
  const short = await createIntent(sampleIntent);
  const simulated = await call(base, "POST", `/api/v1/sandbox/merchants/${creds.merchant}/payment-intents/${short.public_id}/simulate`, { key: creds.key, body: { outcome: "underpaid" } });
  t.equal(simulated.status, 200, "underpaid by the sandbox");
  await page.goto(`${dash}/payments/${short.public_id}`);
  t.equal(await page.locator("#intent-status").textContent(), "underpaid");
  t.match(await page.locator("#timeline").textContent(), /Underpaid: [\d.]+ of [\d.]+ \S+ received/, "the underpaid step");
  t.match(await page.locator("#exception-advice").textContent(), /Ask the shopper to send the remaining [\d.]+ \S+ to the same address, or refund what was received from your wallet/, "what to do next");
  await check(t, page, "payment-underpaid");
  await page.goto(`${dash}/payments`);
  const shortRow = page.locator("#payments tr", { has: page.getByRole("link", { name: short.public_id }) });
  t.match(await shortRow.textContent(), "Ask the shopper to send the remaining", "the list says it too");
  await check(t, page, "payments-exception");
  await page.goto(`${dash}/webhooks/we_${"0".repeat(24)}`);
  await check(t, page, "not-found");

  await page.goto(`${dash}/readiness`);
  t.ok(await page.locator("#checklist li").count(), "the readiness checklist");
  await check(t, page, "readiness");
  // The shop's settings page, where the session may change them (being built alongside: checked once it is in the nav).
  if (await page.locator("nav").getByRole("link", { name: "Shop settings" }).count()) {
    await page.locator("nav").getByRole("link", { name: "Shop settings" }).click();
    await page.waitForURL(`${dash}/settings`);
    await check(t, page, "settings");
  }
  await page.goto(`${dash}/payments/new`);
  t.equal(await page.getByLabel("Amount").count(), 1, "the new payment form");
  await check(t, page, "new-payment");

  // Keyboard: the skip link is the first stop and leads to the content.
  await page.keyboard.press("Tab");
  t.equal(await page.evaluate("document.activeElement && document.activeElement.textContent"), "Skip to content");

  // An API key made in the browser with a chosen scope: its secret once, never again; revoked after asking.
  await page.goto(`${dash}/api-keys`);
  await check(t, page, "api-keys");
  await page.getByLabel("payment_intents:read").check();
  await page.getByRole("button", { name: "Create key" }).click();
  const apiSecret = ((await page.locator("#new-secret").textContent()) ?? "").trim();
  t.match(apiSecret, /^sk_test_/, "the new key's secret is shown");
  t.ok(await page.getByRole("button", { name: "Copy secret" }).isVisible(), "with a copy button");
  await check(t, page, "api-key-created");
  t.equal((await call(base, "GET", `/api/v1/merchants/${creds.merchant}/payment-intents`, { key: apiSecret })).status, 200, "it works on the API");
  await page.goto(`${dash}/api-keys`);
  t.notMatch(await page.content(), apiSecret, "not on the list again");
  await page.getByRole("link", { name: `Revoke ${apiSecret.slice(0, 12)}…` }).click();
  await page.waitForURL(/\/api-keys\/key_[0-9A-Za-z]+\/revoke$/);
  await check(t, page, "api-key-revoke");
  await page.getByRole("button", { name: "Revoke key" }).click();
  await page.waitForURL(/done=revoked/);
  t.equal((await call(base, "GET", `/api/v1/merchants/${creds.merchant}/payment-intents`, { key: apiSecret })).status, 401, "revoked: refused");

  // A read-only one-time link: the token leaves the address bar, and no action button is shown.
  const { credential } = await createInternalCredential(s.app.db.em.fork(), "dashboard browser test", ["admin"], "test");
  const admin = createClient(AdminService, createGrpcTransport({ baseUrl: s.rpcUrl }));
  const link = await admin.createDashboardLink({ merchant: creds.merchant, readOnly: true }, { headers: { authorization: `Bearer ${credential}` } });
  const reader = await newPage(browser, problems);
  await reader.goto(link.url.replace("http://127.0.0.1", base));
  await reader.waitForURL(`${dash}/payments`);
  t.notMatch(reader.url(), "token", "the token is gone from the address bar");
  t.match(await reader.locator("header").textContent(), "Read-only");
  const pending = await createIntent(sampleIntent);
  await reader.goto(`${dash}/payments/${pending.public_id}`);
  t.equal(await reader.getByRole("button", { name: "Cancel payment" }).count(), 0, "no cancel button");
  await reader.goto(`${dash}/webhooks/${failing.id}`);
  t.equal(await reader.locator("main button").count(), 0, "no endpoint actions, no replay");
  await reader.goto(`${dash}/webhooks`);
  t.equal(await reader.getByRole("button", { name: "Add endpoint" }).count(), 0, "no create form");
  // The same link again, in another browser: used.
  const again = await newPage(browser, problems);
  await again.goto(link.url.replace("http://127.0.0.1", base));
  await again.waitForLoadState("networkidle");
  t.equal(new URL(again.url()).pathname, "/dashboard/link");
  t.match(await again.locator("main").textContent(), "not valid", "a link works once");
  await check(t, again, "link-used");
  await check(t, reader, "read-only-webhooks");

  t.same(problems, [], "no CSP violation or script error on any page");
});

t.test("signed in to one shop, a link to another asks first: nothing changes until its button is pressed", { skip: noBrowser }, async (t) => {
  const browser = await chromium.launch({ executablePath, args: ["--no-sandbox"] });
  t.teardown(() => browser.close());
  const problems: string[] = [];
  const page = await newPage(browser, problems);
  await page.goto(`${dash}/sign-in`);
  await page.getByLabel("API key").fill(creds.key);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL(`${dash}/payments`);

  // Another merchant's link, as someone might send it.
  const other = await merchantWithKey(s.app);
  const { credential } = await createInternalCredential(s.app.db.em.fork(), "dashboard link test", ["admin"], "test");
  const admin = createClient(AdminService, createGrpcTransport({ baseUrl: s.rpcUrl }));
  const link = await admin.createDashboardLink({ merchant: other.merchant }, { headers: { authorization: `Bearer ${credential}` } });
  await page.goto(link.url.replace("http://127.0.0.1", base));
  await page.waitForLoadState("networkidle");
  t.equal(new URL(page.url()).pathname, "/dashboard/link", "still on the link's page: not sent");
  t.notMatch(page.url(), "token", "the token left the address bar all the same");
  t.match(await page.locator("main").textContent(), `You are signed in to ${creds.merchant}`, "the page says which shop it would end");
  await check(t, page, "link-asks-first");
  await page.goto(`${dash}/payments`);
  t.match(await page.locator("header").textContent(), creds.merchant, "still in the first shop");

  await page.goto(link.url.replace("http://127.0.0.1", base));
  await page.getByRole("button", { name: "Sign out there and sign in here" }).click();
  await page.waitForURL(`${dash}/payments`);
  t.match(await page.locator("header").textContent(), other.merchant, "in the link's shop once asked");
  t.match(await page.locator("header").textContent(), "Read-only", "with the link's scopes: read-only by default");
  t.same(problems, [], "no CSP violation or script error");
});
