// The shop's name and look (issue 64): a logo URL and brand colour set by the admin CLI's functions,
// the API (MerchantService) and the dashboard's Shop settings, refused when they are not an https
// logo or a #rrggbb colour (nothing changed); shown in the dashboard's header and on the checkout
// page, whose CSP lets the logo's origin load images and nothing else new; the checkout page in a
// brand colour has no serious or critical axe violation (Chromium; skipped without it).
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { chromium } from "playwright-core";
import t from "tap";
import { createApiKey, createMerchant, showMerchant, updateMerchant } from "../../services/auth/admin.ts";
import { contentSecurityPolicy } from "../../services/checkout/handler.ts";
import { dashboardContentSecurityPolicy } from "../../services/dashboard/handler.ts";
import { call, idemKey, sampleIntent, startTestApp } from "../helpers/harness.ts";
import { dashboardClient } from "../helpers/dashboard.ts";

const executablePath = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const noBrowser = existsSync(executablePath) ? false : `no Chromium at ${executablePath}`;

const s = await startTestApp(t, { DASHBOARD_BASE_URL: "http://127.0.0.1/dashboard", CHECKOUT_BASE_URL: "http://127.0.0.1/checkout", DASHBOARD_SIGN_IN_RATE_LIMIT_PER_MINUTE: "1000" });
const em = () => s.app.db.em.fork();
const shop = await createMerchant(em(), "My Shop");
const writer = await createApiKey(em(), shop.id, "test", ["payment_intents:read", "payment_intents:write", "merchant:write"]);
const reader = await createApiKey(em(), shop.id, "test", ["payment_intents:read"]);
const profile = (key = writer.api_key) => call(s.base, "GET", `/api/v1/merchants/${shop.id}/profile`, { key });
const update = (body: Record<string, unknown>, key = writer.api_key) => call(s.base, "POST", `/api/v1/merchants/${shop.id}/profile`, { key, body });
const badLogos = ["http://cdn.example/logo.png", "javascript:alert(1)", "data:image/svg+xml;base64,PHN2Zz48L3N2Zz4=", `https://cdn.example/${"a".repeat(2048)}`];
const badColors = ["red", "#fff", "#12345g", "1a7f37"];

t.test("the admin CLI's update sets the name and look; a bad value is refused and nothing changes", async (t) => {
  const other = await createMerchant(em(), "Other");
  const shown = await updateMerchant(em(), other.id, { name: "Other Shop", logoUrl: "https://cdn.example/o.png", brandColor: "#FFD700" });
  t.match(shown, { name: "Other Shop", logo_url: "https://cdn.example/o.png", brand_color: "#ffd700", brand_text_color: "#000000" });
  for (const logoUrl of badLogos) await t.rejects(updateMerchant(em(), other.id, { name: "Changed", logoUrl }), /--logo-url/, `refused: ${logoUrl.slice(0, 30)}`);
  for (const brandColor of badColors) await t.rejects(updateMerchant(em(), other.id, { name: "Changed", brandColor }), /--brand-color/, `refused: ${brandColor}`);
  t.match(await showMerchant(em(), other.id), { name: "Other Shop", logo_url: "https://cdn.example/o.png", brand_color: "#ffd700" }, "nothing changed");
  t.match(await updateMerchant(em(), other.id, { logoUrl: "", brandColor: "" }), { name: "Other Shop", logo_url: null, brand_color: null }, '"" removes them');
});

t.test("the API reads and changes the look; bad values are 400 in the error envelope, nothing changed; merchant:write is needed", async (t) => {
  t.match((await profile(reader.api_key)).body.data, { id: shop.id, name: "My Shop" }, "any key reads it");
  const refused = await update({ brand_color: "#112233" }, reader.api_key);
  t.equal(refused.status, 403);
  t.equal(refused.body.error.code, "insufficient_scope");
  for (const logo_url of badLogos) {
    const res = await update({ name: "Changed", logo_url });
    t.equal(res.status, 400, `refused: ${logo_url.slice(0, 30)}`);
    t.match(res.body.error, { code: "validation_failed", request_id: String });
  }
  for (const brand_color of badColors) {
    const res = await update({ name: "Changed", brand_color });
    t.equal(res.status, 400, `refused: ${brand_color}`);
    t.match(res.body.error, { code: "validation_failed", param: "brand_color" });
  }
  t.same((await profile()).body.data.name, "My Shop", "nothing changed");
  const ok = await update({ logo_url: "https://cdn.example/shop/logo.svg", brand_color: "#1D4ED8" });
  t.equal(ok.status, 200);
  t.match(ok.body.data, { name: "My Shop", logo_url: "https://cdn.example/shop/logo.svg", brand_color: "#1d4ed8", brand_text_color: "#ffffff" });
});

t.test("the checkout page shows the logo and name, in the brand colour; its CSP adds the logo's origin to img-src and nothing else", async (t) => {
  const res = await call(s.base, "POST", `/api/v1/merchants/${shop.id}/payment-intents`, { key: writer.api_key, idempotencyKey: idemKey(), body: sampleIntent });
  const page = await fetch(`${s.base}/checkout/${res.body.data.public_id}`);
  const html = await page.text();
  t.equal(page.status, 200);
  t.match(html, '<img class="logo" src="https://cdn.example/shop/logo.svg" alt="" referrerpolicy="no-referrer"');
  t.match(html, '<h1 class="title">Pay My Shop</h1>');
  t.match(html, '<link rel="stylesheet" href="/checkout/assets/brand-1d4ed8.css">');
  t.equal(page.headers.get("content-security-policy"), contentSecurityPolicy.replace("img-src 'self' data:", "img-src 'self' data: https://cdn.example"));
  const css = await fetch(`${s.base}/checkout/assets/brand-1d4ed8.css`);
  t.equal(css.status, 200);
  t.match(css.headers.get("content-type"), "text/css");
  t.match(await css.text(), "background: #1d4ed8; color: #ffffff");
  t.equal((await fetch(`${s.base}/checkout/assets/brand-1d4ed8;x.css`)).status, 404, "only six hex digits make a stylesheet");
});

t.test("the dashboard's Shop settings: the form changes name and look, a bad value comes back with its message and changes nothing; the header shows the logo", async (t) => {
  const c = dashboardClient(s.base);
  t.equal((await c.signIn(writer.api_key)).status, 303);
  const form = await c.get("/dashboard/settings");
  t.equal(form.status, 200);
  t.match(form.body, 'id="shop-settings"');
  t.match(form.body, 'value="https://cdn.example/shop/logo.svg"');
  const header = form.body.slice(form.body.indexOf('<header class="top">'), form.body.indexOf("</header>"));
  t.match(header, '<img class="shop-logo" src="https://cdn.example/shop/logo.svg" alt="" referrerpolicy="no-referrer"');
  t.match(header, "<strong>My Shop</strong>");
  t.match(header, ">Shop settings</a>");
  t.equal(form.headers.get("content-security-policy"), dashboardContentSecurityPolicy.replace("img-src 'self' data:", "img-src 'self' data: https://cdn.example"));

  for (const [logo_url, brand_color] of [["http://cdn.example/x.png", "#000000"], ["javascript:alert(1)", ""], ["https://cdn.example/x.png", "blue"]] as const) {
    const bad = await c.post("/dashboard/settings", { name: "Renamed", logo_url, brand_color }, { from: "/dashboard/settings" });
    t.equal(bad.status, 400, `refused: ${logo_url} ${brand_color}`);
    t.match(bad.body, /role="alert">The (logo URL|brand colour)/, "the message on the form");
    t.match(bad.body, 'value="Renamed"', "with what was typed");
  }
  t.match((await profile()).body.data, { name: "My Shop", logo_url: "https://cdn.example/shop/logo.svg", brand_color: "#1d4ed8" }, "nothing changed");
  const noCsrf = await c.post("/dashboard/settings", { name: "Renamed", logo_url: "", brand_color: "" }, { csrf: false });
  t.equal(noCsrf.status, 403, "no CSRF token: refused");

  const saved = await c.post("/dashboard/settings", { name: "Renamed Shop", logo_url: "https://img.example/r.png", brand_color: "#ffd700" }, { from: "/dashboard/settings" });
  t.equal(saved.status, 303);
  t.equal(saved.headers.get("location"), "/dashboard/settings?done=saved");
  const after = await c.get("/dashboard/payments");
  t.match(after.body, '<img class="shop-logo" src="https://img.example/r.png"');
  t.match(after.body, "<strong>Renamed Shop</strong>");
  t.match(after.headers.get("content-security-policy"), "img-src 'self' data: https://img.example;");

  const r = dashboardClient(s.base);
  await r.signIn(reader.api_key);
  const readerPage = await r.get("/dashboard/payments");
  t.notMatch(readerPage.body, ">Shop settings</a>", "not offered without merchant:write");
  const refused = await r.post("/dashboard/settings", { name: "X", logo_url: "", brand_color: "" }, { from: "/dashboard/payments" });
  t.equal(refused.status, 403);
  t.match(refused.body, "merchant:write");
  t.equal((await profile()).body.data.name, "Renamed Shop");
});

t.test("the checkout page in a brand colour: no serious or critical axe violation, no CSP report", { skip: noBrowser }, async (t) => {
  await update({ name: "My Shop", logo_url: "https://logo.invalid/shop.svg", brand_color: "#ffd700" });
  const res = await call(s.base, "POST", `/api/v1/merchants/${shop.id}/payment-intents`, { key: writer.api_key, idempotencyKey: idemKey(), body: sampleIntent });
  const browser = await chromium.launch({ executablePath, args: ["--no-sandbox"] });
  t.teardown(() => browser.close());
  const page = await (await browser.newContext({ viewport: { width: 390, height: 844 } })).newPage();
  const csp: string[] = [];
  page.on("console", (msg) => {
    if (/Content[- ]Security[- ]Policy|Refused to/i.test(msg.text())) csp.push(msg.text());
  });
  await page.goto(`${s.base}/checkout/${res.body.data.public_id}`);
  const button = page.locator("#copy");
  await button.waitFor({ state: "visible" });
  t.same(await page.evaluate(`(() => { const s = getComputedStyle(document.querySelector("#copy")); return [s.backgroundColor, s.color]; })()`), ["rgb(255, 215, 0)", "rgb(0, 0, 0)"], "the main button in the brand colour, black text on it");
  await page.evaluate(readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8"));
  const result = (await page.evaluate("axe.run(document, { resultTypes: ['violations'] })")) as { violations: { id: string; impact: string }[] };
  t.same(result.violations.filter((v) => v.impact === "serious" || v.impact === "critical").map((v) => v.id), [], "no serious or critical violation");
  t.same(csp, [], "nothing the CSP refused");
});
