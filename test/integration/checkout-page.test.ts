// The hosted checkout page on the real app: HTTP-level checks (headers, status JSON, 404s for
// path tricks, HEAD, 405), the handler's failure pages, and a real phone-sized Chromium that
// watches a Test intent go underpaid → confirmed through the sandbox without a reload.
import { existsSync, mkdirSync } from "node:fs";
import http from "node:http";
import path from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import { chromium } from "playwright-core";
import t from "tap";
import { executablePath, noBrowser } from "../helpers/browser.ts";
import { checkoutPages, checkoutPathOf, contentSecurityPolicy } from "../../services/checkout/handler.ts";
import { call, idemKey, merchantWithKey, sampleIntent, startTestApp, until } from "../helpers/harness.ts";

const s = await startTestApp(t, { CHECKOUT_BASE_URL: "http://127.0.0.1/checkout" });
const { base, app } = s;
const a = await merchantWithKey(app);
const intentsPath = (merchant = a.merchant) => `/api/v1/merchants/${merchant}/payment-intents`;

async function createIntent(key = a.key, merchant = a.merchant, body: Record<string, unknown> = sampleIntent) {
  const res = await call(base, "POST", intentsPath(merchant), { key, idempotencyKey: idemKey(), body });
  if (res.status !== 200) throw new Error(`create: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data;
}

async function simulate(id: string, outcome: string) {
  const res = await call(base, "POST", `/api/v1/sandbox/merchants/${a.merchant}/payment-intents/${id}/simulate`, { key: a.key, body: { outcome } });
  if (res.status !== 200) throw new Error(`simulate ${outcome}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data;
}

interface RawResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** A request with the target sent exactly as given (fetch would resolve dot segments first). */
function raw(method: string, target: string, origin = base, headers: Record<string, string> = {}): Promise<RawResponse> {
  const u = new URL(origin);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: u.hostname, port: u.port, method, path: target, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString("utf8") }));
    });
    req.on("error", reject);
    req.end();
  });
}

const pagePath = (id: string) => `/checkout/${id}`;

t.test("the page: HTML with a strict CSP and the shopper's facts", async (t) => {
  const pi = await createIntent();
  t.equal(new URL(pi.checkout_url).pathname, pagePath(pi.public_id), "checkout_url's path is where the page is");
  const res = await raw("GET", pagePath(pi.public_id));
  t.equal(res.status, 200);
  t.equal(res.headers["content-type"], "text/html; charset=utf-8");
  t.equal(res.headers["content-security-policy"], contentSecurityPolicy);
  t.equal(
    contentSecurityPolicy,
    "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  );
  t.equal(res.headers["cache-control"], "no-store");
  t.equal(res.headers["x-content-type-options"], "nosniff");
  t.equal(res.headers["referrer-policy"], "no-referrer");
  t.equal(res.headers["x-frame-options"], "DENY");
  t.ok(res.headers["x-request-id"], "the gateway's request id");
  t.match(res.body, /^<!doctype html>\n<html lang="en">/);
  t.match(res.body, "<strong>Test mode</strong>");
  t.match(res.body, `<span class="amount-value" id="amount">12.50</span> <span class="amount-asset" id="asset">USDC</span>`);
  t.match(res.body, `>${pi.deposit_address}</code>`);
  t.match(res.body, /<svg class="qr-code" role="img"/);
  t.match(res.body, `data-status-url="/checkout/${pi.public_id}/status.json"`);
  t.notMatch(res.body, /order-|merchant_reference|metadata/, "no merchant fields");

  const css = res.body.match(/<link rel="stylesheet" href="([^"]+)">/)?.[1] ?? "";
  const js = res.body.match(/<script src="([^"]+)" defer>/)?.[1] ?? "";
  t.match(css, /^\/checkout\/assets\/checkout\.css\?v=[0-9a-f]{16}$/, "versioned stylesheet URL");
  t.match(js, /^\/checkout\/assets\/checkout\.js\?v=[0-9a-f]{16}$/, "versioned script URL");
  for (const [url, type] of [
    [css, "text/css; charset=utf-8"],
    [js, "text/javascript; charset=utf-8"],
  ] as const) {
    const asset = await raw("GET", url);
    t.equal(asset.status, 200, url);
    t.equal(asset.headers["content-type"], type);
    t.equal(asset.headers["cache-control"], "public, max-age=31536000, immutable");
    t.equal(asset.headers["x-content-type-options"], "nosniff");
    const etag = String(asset.headers.etag);
    t.equal((await raw("GET", url, base, { "if-none-match": etag })).status, 304, "revalidates by ETag");
  }

  const live = await merchantWithKey(app, "live", undefined, a.merchant);
  const livePi = await createIntent(live.key, live.merchant);
  const livePage = await raw("GET", pagePath(livePi.public_id));
  t.equal(livePage.status, 200);
  t.notMatch(livePage.body, /Test mode/, "no Test banner for a Live intent");
  t.match(livePage.body, `on <span id="network">Ethereum</span>`);
});

t.test("status JSON: eight shopper-safe keys, no caching", async (t) => {
  const pi = await createIntent();
  const url = `${pagePath(pi.public_id)}/status.json`;
  let res = await raw("GET", url);
  t.equal(res.status, 200);
  t.equal(res.headers["content-type"], "application/json; charset=utf-8");
  t.equal(res.headers["cache-control"], "no-store");
  t.equal(res.headers["x-content-type-options"], "nosniff");
  let body = JSON.parse(res.body);
  t.same(Object.keys(body).sort(), ["amount_due", "amount_pending", "amount_received", "expires_at", "other_assets_received", "pending_confirmations", "required_confirmations", "status"], "exactly these keys");
  t.same(body, { status: "pending", amount_received: null, amount_pending: null, required_confirmations: 12, pending_confirmations: null, amount_due: "12.5", expires_at: pi.expires_at, other_assets_received: [] });

  await simulate(pi.public_id, "underpaid");
  body = JSON.parse((await raw("GET", url)).body);
  t.same(body, { status: "underpaid", amount_received: "6.25", amount_pending: "0", required_confirmations: 12, pending_confirmations: null, amount_due: "6.25", expires_at: pi.expires_at, other_assets_received: [] });
  await simulate(pi.public_id, "confirmed");
  res = await raw("GET", url);
  t.same(JSON.parse(res.body), { status: "confirmed", amount_received: "12.5", amount_pending: "0", required_confirmations: 12, pending_confirmations: null, amount_due: "0", expires_at: pi.expires_at, other_assets_received: [] });
  t.equal((await raw("HEAD", url)).body, "", "HEAD: no body");
});

t.test("404 page for unknown ids, malformed ids and path tricks; nothing reflected", async (t) => {
  const pi = await createIntent();
  const id = pi.public_id as string;
  const unknown = `pi_${"Z".repeat(24)}`;
  const targets = [
    `/checkout/${unknown}`,
    `/checkout/${unknown}/status.json`,
    `/checkout/pi_123`,
    `/checkout/PI_${id.slice(3)}`,
    `/checkout/${id}x`,
    `/checkout/${id}/`,
    `/checkout/${id}/other`,
    `/checkout/${id}/status.json/x`,
    `/checkout/${id}/..`,
    `/checkout/${id}/../${id}`,
    `/checkout/x/../${id}`,
    `/checkout/%2e%2e/checkout/${id}`,
    `/checkout/..%2F${id}`,
    `/checkout/${id}%2Fstatus.json`,
    `/checkout/${id}%2fstatus.json`,
    `/checkout/%70i_${id.slice(3)}`,
    `/checkout\\${id}`,
    `/checkout%2F${id}`,
    `/checkout%5c${id}`,
    `/checkout/${id}\\status.json`,
    `/checkout/${"a".repeat(1024)}`,
    `/checkout/pi_${"A".repeat(1021)}`,
    `/checkout/${id}/${"b".repeat(1024)}`,
    `/checkout/assets/nope.css`,
    `/checkout/assets/../assets/checkout.css`,
    `/checkout/assets/__proto__`,
    `/checkout/<script>alert(1)</script>`,
    `/checkout`,
    `/checkout/`,
    `/foo/../checkout/${unknown}`,
  ];
  for (const target of targets) {
    const res = await raw("GET", target);
    t.equal(res.status, 404, target);
    t.equal(res.headers["content-type"], "text/html; charset=utf-8", `${target}: HTML`);
    t.equal(res.headers["content-security-policy"], contentSecurityPolicy, `${target}: CSP`);
    t.match(res.body, "<h1 class=\"title\">Payment not found</h1>", `${target}: the 404 page`);
    t.notMatch(res.body, /<script>alert|aaaa|AAAA|ZZZZ/, `${target}: nothing of the request in the page`);
  }
  t.equal((await raw("GET", `/checkout/${id}`)).status, 200, "the real id still answers");
  const head404 = await raw("HEAD", `/checkout/${unknown}`);
  t.equal(head404.status, 404, "HEAD of an unknown id");
  t.equal(head404.body, "");
});

t.test("HEAD, 405 and the API beside it", async (t) => {
  const pi = await createIntent();
  const head = await raw("HEAD", pagePath(pi.public_id));
  t.equal(head.status, 200);
  t.equal(head.body, "");
  t.equal(head.headers["content-type"], "text/html; charset=utf-8");
  t.equal(head.headers["content-security-policy"], contentSecurityPolicy);
  t.ok(Number(head.headers["content-length"]) > 1000, "the GET's length");
  for (const [method, target] of [
    ["POST", pagePath(pi.public_id)],
    ["PUT", `${pagePath(pi.public_id)}/status.json`],
    ["DELETE", pagePath(pi.public_id)],
    ["OPTIONS", pagePath(pi.public_id)],
    ["POST", "/checkout/assets/checkout.js"],
  ]) {
    const res = await raw(method ?? "", target ?? "");
    t.equal(res.status, 405, `${method} ${target}`);
    t.equal(res.headers.allow, "GET, HEAD");
    t.equal(res.headers["content-type"], "text/html; charset=utf-8");
  }
  const api = await raw("GET", "/api/v1/nope");
  t.equal(api.status, 404);
  t.match(api.headers["content-type"], /^application\/json/, "/api/ stays the API's");
  const other = await raw("GET", "/checkoutx/y");
  t.match(other.headers["content-type"], /^application\/json/, "a path outside the checkout path is the API's");
  t.equal((await call(base, "GET", `${intentsPath()}/${pi.public_id}`, { key: a.key })).status, 200, "the API answers as before");
});

t.test("the handler alone: failures, the root path, a path under /api/", async (t) => {
  const id = `pi_${"a".repeat(24)}`;
  let failure: unknown = new ConnectError("db password is hunter2", Code.Unavailable);
  const handler = checkoutPages({
    checkoutBaseUrl: "https://pay.example.test/",
    getCheckout: async () => {
      throw failure;
    },
  });
  const server = http.createServer((req, res) => {
    void handler(req, res, new URL(req.url ?? "/", "http://gateway"), "127.0.0.1").then((taken) => {
      if (!taken) {
        res.writeHead(418);
        res.end("not taken");
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const origin = `http://127.0.0.1:${(server.address() as { port: number }).port}`;

  let res = await raw("GET", `/${id}`, origin);
  t.equal(res.status, 503, "unavailable");
  t.equal(res.headers["retry-after"], "1");
  t.equal(res.headers["content-security-policy"], contentSecurityPolicy);
  t.notMatch(res.body, /hunter2|ConnectError|\[unavailable\]/i, "no internals");
  failure = new Error("boom at /srv/app/secret.ts:12");
  res = await raw("GET", `/${id}/status.json`, origin);
  t.equal(res.status, 500, "other failures");
  t.match(res.headers["content-type"], /^text\/html/);
  t.notMatch(res.body, /boom|secret\.ts/, "no internals");
  t.equal((await raw("GET", "/assets/checkout.css", origin)).status, 200, "at the root: the assets");
  t.equal((await raw("GET", "/nope", origin)).status, 404, "at the root: other paths are the 404 page");
  t.equal((await raw("GET", "/api/v1/x", origin)).status, 418, "at the root: /api/ is never taken");
  t.equal((await raw("GET", "/api", origin)).status, 418, "nor /api itself");
  t.equal(checkoutPathOf("https://pay.example.test"), "");
  t.equal(checkoutPathOf("https://x.test/pay/checkout/"), "/pay/checkout");
  t.throws(() => checkoutPathOf("https://x.test/api/checkout"), /must not be under \/api\//);
});


t.test("a phone browser: live status without reloading, keyboard, no CSP violations", { skip: noBrowser }, async (t) => {
  const browser = await chromium.launch({ executablePath, args: ["--no-sandbox"] });
  t.teardown(() => browser.close());
  const context = await browser.newContext({ viewport: { width: 390, height: 844 }, deviceScaleFactor: 2, locale: "en-US" });
  await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: base });
  const page = await context.newPage();
  const cspErrors: string[] = [];
  const pageErrors: string[] = [];
  page.on("console", (msg) => {
    if (/Content[- ]Security[- ]Policy|Refused to/i.test(msg.text())) cspErrors.push(msg.text());
  });
  page.on("pageerror", (err) => pageErrors.push(err.message));
  let navigations = 0;
  page.on("framenavigated", (frame) => {
    if (frame === page.mainFrame()) navigations++;
  });
  const requests: string[] = [];
  page.on("request", (req) => requests.push(req.url()));
  // Runs outside the page's CSP (DevTools): records any violation the page itself reports.
  await page.addInitScript("window.__csp = []; document.addEventListener('securitypolicyviolation', (e) => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));");

  const pi = await createIntent();
  const response = await page.goto(`${base}${pagePath(pi.public_id)}`);
  t.equal(response?.status(), 200);
  await page.evaluate("window.__marker = 'same page'");
  const text = async (selector: string) => ((await page.locator(selector).textContent()) ?? "").trim();

  t.equal(await text("#amount"), "12.50", "amount");
  t.equal(await text("#asset"), "USDC", "asset");
  t.equal(await text("#network"), "Ethereum Sepolia testnet", "network");
  t.equal(await text("#address"), pi.deposit_address, "deposit address");
  t.ok(await page.locator(".banner").isVisible(), "the Test mode banner shows");
  t.match(await text(".banner"), /^Test mode/);
  const qr = page.getByRole("img", { name: "QR code to pay 12.50 USDC on Ethereum Sepolia testnet" });
  t.ok(await qr.isVisible(), "the QR code, by its accessible name");
  const box = await qr.boundingBox();
  t.ok(box !== null && box.width >= 180 && box.x >= 0 && box.x + box.width <= 390, `QR code fits the phone (${JSON.stringify(box)})`);
  t.equal(await text("#status-title"), "Waiting for payment");
  t.ok(await page.locator("#copy").isVisible(), "the copy button, shown by the JS");
  const scrollWidth = await page.evaluate("document.documentElement.scrollWidth");
  t.equal(scrollWidth, 390, "no horizontal scrolling");

  const first = await text("#countdown");
  t.match(first, /^1[45]:[0-5]\d$/, "countdown from about 15 minutes");
  await until("the countdown to tick", async () => (await text("#countdown")) !== first, 2000);
  t.pass("the countdown changed within 2 s");

  await simulate(pi.public_id, "underpaid");
  await until("the page to show underpaid", async () => (await text("#status-title")) === "Partly paid", 10_000);
  t.equal(await text("#status-detail"), "Amount still due: 6.25 USDC. Send it to the same address.", "the amount still due, without a reload");
  const qrDue = page.getByRole("img", { name: "QR code to pay 6.25 USDC on Ethereum Sepolia testnet" });
  await until("a QR code of the amount still due", async () => qrDue.isVisible(), 5000);
  t.pass("the QR code now asks for the amount still due");
  t.match(await page.locator("#wallet").getAttribute("href"), /&uint256=6250000$/, "and so does the wallet link");
  t.equal(await page.locator("svg.qr-code").count(), 1, "one QR code");
  t.equal(await page.evaluate("window.__marker"), "same page", "no reload");

  const screenshot = path.resolve(import.meta.dirname, "../screenshots/checkout.png");
  if (process.env.CHECKOUT_SCREENSHOT || !existsSync(screenshot)) {
    mkdirSync(path.dirname(screenshot), { recursive: true });
    await page.screenshot({ path: screenshot, fullPage: true });
    t.pass(`screenshot written to ${screenshot}`);
  }

  // Keyboard: Tab reaches the copy button, which shows focus and copies.
  let focused = "";
  for (let i = 0; i < 10 && focused !== "copy"; i++) {
    await page.keyboard.press("Tab");
    focused = String(await page.evaluate("document.activeElement && document.activeElement.id"));
  }
  t.equal(focused, "copy", "Tab reaches the copy button");
  t.equal(await page.evaluate("getComputedStyle(document.activeElement).outlineStyle"), "solid", "with a visible focus outline");
  await page.keyboard.press("Enter");
  await until("the copy confirmation", async () => (await text("#copy-status")) !== "", 3000);
  t.equal(await text("#copy-status"), "Address copied.");
  t.equal(await page.evaluate("navigator.clipboard.readText()"), pi.deposit_address, "the address is on the clipboard");

  await simulate(pi.public_id, "confirmed");
  await until("the page to show paid", async () => (await text("#status-title")) === "Paid", 10_000);
  t.match(await text("#status-detail"), /^Thank you/);
  t.notOk(await page.locator("#pay").isVisible(), "paid: the payment instructions are gone");
  t.equal(await page.evaluate("window.__marker"), "same page", "still no reload");
  t.equal(navigations, 1, "one navigation: the first load");
  t.equal(await page.title(), "Paid — 12.50 USDC");

  const polls = () => requests.filter((u) => u.endsWith("/status.json")).length;
  const after = polls();
  await new Promise((r) => setTimeout(r, 3500));
  t.equal(polls(), after, "no polling after a final status");
  t.ok(after >= 2, `polled status.json (${after} times)`);
  t.same(requests.filter((u) => !u.startsWith(`${base}/checkout/`)), [], "every request stays under the checkout path");

  t.same(cspErrors, [], "no CSP errors in the console");
  t.same(await page.evaluate("window.__csp"), [], "no CSP violation events");
  t.same(pageErrors, [], "no script errors");

  // Without JavaScript: everything but the live refresh.
  const noJs = await browser.newContext({ viewport: { width: 390, height: 844 }, javaScriptEnabled: false });
  t.teardown(() => noJs.close());
  const plain = await noJs.newPage();
  const pending = await createIntent();
  await plain.goto(`${base}${pagePath(pending.public_id)}`);
  t.equal(((await plain.locator("#address").textContent()) ?? "").trim(), pending.deposit_address, "no JS: the address");
  t.ok(await plain.getByRole("img", { name: /QR code to pay/ }).isVisible(), "no JS: the QR code");
  t.match((await plain.locator("#countdown").textContent()) ?? "", /^1[45]:[0-5]\d$/, "no JS: the time left, as rendered");
  t.notOk(await plain.locator("#copy").isVisible(), "no JS: no copy button that cannot work");
  t.ok(await plain.getByRole("link", { name: "reload it" }).isVisible(), "no JS: how to see the latest status");
});

t.test("the page offers the way back to the shop: redirect_url and cancel_url, on the HTTP page", async (t) => {
  const pi = await createIntent(a.key, a.merchant, { ...sampleIntent, redirect_url: "https://shop.example/orders/1001/thanks", cancel_url: "https://shop.example/cart" });
  const res = await raw("GET", pagePath(pi.public_id));
  t.match(res.body, '<a class="button button-secondary" id="return-cancel" href="https://shop.example/cart" data-host="shop.example">Cancel and return to shop.example</a>', "pending: the cancel link");
  t.match(res.body, /<a class="button button-secondary" id="return-redirect" href="https:\/\/shop.example\/orders\/1001\/thanks" data-host="shop.example" hidden>/, "the back link, hidden until paid");
  const plain = await raw("GET", pagePath((await createIntent()).public_id));
  t.notMatch(plain.body, /id="return-/, "none given: no link");
});

// A shop's pages, as the browser reaches them: intercepted, so no name needs to resolve.
const shopPage = "<!doctype html><title>The shop</title><h1>Thank you for your order</h1>";

t.test("a phone browser: cancel while pending, back to the shop once paid, without a reload", { skip: noBrowser }, async (t) => {
  const browser = await chromium.launch({ executablePath, args: ["--no-sandbox"] });
  t.teardown(() => browser.close());
  const context = await browser.newContext({ viewport: { width: 390, height: 844 }, deviceScaleFactor: 2, locale: "en-US" });
  const shopRequests: { url: string; referer: string | undefined }[] = [];
  await context.route("https://shop.example/**", async (route) => {
    shopRequests.push({ url: route.request().url(), referer: (await route.request().allHeaders()).referer });
    await route.fulfill({ status: 200, contentType: "text/html", body: shopPage });
  });
  const page = await context.newPage();
  const pageErrors: string[] = [];
  page.on("pageerror", (err) => pageErrors.push(err.message));
  const shots = process.env.CHECKOUT_SCREENSHOT_DIR;
  const shot = async (name: string) => {
    if (!shots) return;
    mkdirSync(shots, { recursive: true });
    await page.screenshot({ path: path.join(shots, name), fullPage: true });
    t.pass(`screenshot ${path.join(shots, name)}`);
  };
  const redirect = "https://shop.example/orders/1001/thanks";
  const cancel = "https://shop.example/cart?order=1001";
  const pi = await createIntent(a.key, a.merchant, { ...sampleIntent, redirect_url: redirect, cancel_url: cancel });
  await page.goto(`${base}${pagePath(pi.public_id)}`);
  await page.evaluate("window.__marker = 'same page'");
  const cancelLink = page.getByRole("link", { name: "Cancel and return to shop.example" });
  const backLink = page.getByRole("link", { name: "Back to shop.example" });
  t.ok(await cancelLink.isVisible(), "pending: Cancel and return to shop.example");
  t.equal(await cancelLink.getAttribute("href"), cancel, "to the cancel_url");
  t.equal(await backLink.count(), 0, "no way back as paid yet");
  await shot("checkout-return-pending.png");

  await simulate(pi.public_id, "confirmed");
  await until("the page to show paid", async () => ((await page.locator("#status-title").textContent()) ?? "").trim() === "Paid", 10_000);
  await until("the back link", async () => backLink.isVisible(), 5000);
  t.pass("paid: Back to shop.example shows, without a reload");
  t.equal(await backLink.getAttribute("href"), redirect, "to the redirect_url");
  t.notOk(await cancelLink.isVisible(), "the cancel link is gone");
  t.equal(await page.evaluate("window.__marker"), "same page", "no reload");
  await shot("checkout-return-paid.png");

  await backLink.click();
  await page.waitForURL(redirect);
  t.equal(await page.title(), "The shop", "the shopper is at the shop");
  t.same(shopRequests, [{ url: redirect, referer: undefined }], "one request to the shop, with no Referer naming the payment");

  // Cancelled by the merchant while the shopper watches: the cancel_url, now as the way back.
  const other = await createIntent(a.key, a.merchant, { ...sampleIntent, cancel_url: cancel });
  await page.goto(`${base}${pagePath(other.public_id)}`);
  t.ok(await cancelLink.isVisible(), "pending again: the cancel link");
  const cancelled = await call(base, "POST", `${intentsPath()}/${other.public_id}/cancel`, { key: a.key });
  t.equal(cancelled.status, 200);
  await until("the page to show cancelled", async () => backLink.isVisible(), 10_000);
  t.equal(await backLink.getAttribute("href"), cancel, "cancelled: Back to shop.example, to the cancel_url");
  t.equal(((await page.locator("#status-title").textContent()) ?? "").trim(), "Cancelled");
  await shot("checkout-return-cancelled.png");

  // Without JavaScript the page rendered for the status offers the same.
  const noJs = await browser.newContext({ viewport: { width: 390, height: 844 }, javaScriptEnabled: false });
  t.teardown(() => noJs.close());
  const plain = await noJs.newPage();
  await plain.goto(`${base}${pagePath(pi.public_id)}`);
  t.ok(await plain.getByRole("link", { name: "Back to shop.example" }).isVisible(), "no JS, paid: the back link");
  t.equal(await plain.getByRole("link", { name: /Cancel and return/ }).count(), 0, "no JS, paid: no cancel link");
  t.same(pageErrors, [], "no script errors");
});
