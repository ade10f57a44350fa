// Fiat prices where shoppers and cashiers meet them: the Site Gateway's and the terminal's
// creates take a price, and the checkout page in a phone-sized Chromium shows the price beside
// the crypto amount and the time left on the quote. Rates come from the development source
// (RATE_SOURCES=fixed, Test only: 1 BTC = 50000 USD), so nothing here reaches an exchange.
import { existsSync } from "node:fs";
import { chromium } from "playwright-core";
import t from "tap";
import { createSiteCredential } from "../../services/site/credentials.ts";
import { createCashierSession } from "../../services/terminal/sessions.ts";
import { fixedRates } from "../../services/rates/sources.ts";
import { call, idemKey, merchantWithKey, startTestApp, until } from "../helpers/harness.ts";

const { app, base } = await startTestApp(t, { CHECKOUT_BASE_URL: "http://127.0.0.1/checkout", RATE_SOURCES: "fixed" });
const a = await merchantWithKey(app);
const em = () => app.db.em.fork();
const price = { network: "bitcoin", asset: "BTC", price_amount: "100.00", price_currency: "USD" };
t.equal(fixedRates["BTC-USD"], "50000", "the development source's rate the amounts below follow");

/** The first create waits for the engine's first read of the fixed source (at start, in the background). */
async function created(path: string, credential: string, body: Record<string, unknown>) {
  return until(
    `a quoted create on ${path}`,
    async () => {
      const res = await call(base, "POST", path, { key: credential, idempotencyKey: idemKey(), body });
      return res.status === 200 && res.body.data;
    },
    10_000,
  );
}

t.test("the Site Gateway accepts a fiat price, and its shopper view carries the quote", async (t) => {
  const site = await createSiteCredential(em(), a.merchant, "test", ["https://shop.example"]);
  const view = await created("/api/v1/site-payment-intents", site.credential, { ...price, merchant_reference: "cart-7" });
  t.equal(view.requested_amount, "0.002");
  t.equal(view.price_amount, "100.00");
  t.equal(view.price_currency, "USD");
  t.same(view.quote.sources, ["fixed"]);
  t.equal(view.quote.rate, "50000");
  const bad = await call(base, "POST", "/api/v1/site-payment-intents", { key: site.credential, idempotencyKey: idemKey(), body: { ...price, requested_amount: "1" } });
  t.equal(bad.status, 400);
  t.equal(bad.body.error.param, "price_amount");
});

t.test("the terminal takes the cashier's amount in fiat", async (t) => {
  const session = await createCashierSession(em(), { merchantId: a.merchant, environment: "test", cashier: "Ana", terminal: "Till 2" });
  const pi = await created("/api/v1/terminal/pos/payment", session.session, { network: "bitcoin", asset: "BTC", price_amount: "19.99", price_currency: "USD" });
  t.match(pi, { source: "pos", cashier: "Ana", requested_amount: "0.0003998", price_amount: "19.99", price_currency: "USD" });
  t.equal(pi.quote.expires_at, pi.expires_at);
});

t.test("a Live create never takes the development source's rate", async (t) => {
  const live = await merchantWithKey(app, "live");
  const res = await call(base, "POST", `/api/v1/merchants/${live.merchant}/payment-intents`, {
    key: live.key,
    idempotencyKey: idemKey(),
    body: { network: "ethereum", asset: "ETH", price_amount: "10.00", price_currency: "USD" },
  });
  t.equal(res.status, 503);
  t.equal(res.body.error.code, "rate_unavailable");
});

const executablePath = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const noBrowser = existsSync(executablePath) ? false : `no Chromium at ${executablePath}: install it (apt-get install chromium) or set CHROMIUM_PATH`;

t.test("the checkout page in a phone browser: the price in fiat, and the time left on the quote", { skip: noBrowser }, async (t) => {
  const pi = await created(`/api/v1/merchants/${a.merchant}/payment-intents`, a.key, { ...price, expires_in_seconds: 600 });
  const browser = await chromium.launch({ executablePath, args: ["--no-sandbox"] });
  t.teardown(() => browser.close());
  const page = await (await browser.newContext({ viewport: { width: 390, height: 844 }, locale: "en-US" })).newPage();
  const errors: string[] = [];
  page.on("pageerror", (err) => errors.push(err.message));
  page.on("console", (msg) => {
    if (/Content[- ]Security[- ]Policy|Refused to/i.test(msg.text())) errors.push(msg.text());
  });
  t.equal((await page.goto(`${base}/checkout/${pi.public_id}`))?.status(), 200);
  const text = async (selector: string) => ((await page.locator(selector).textContent()) ?? "").trim();
  t.equal(await text("#amount"), "0.002", "the crypto amount");
  t.equal(await text("#price"), "100.00 USD", "the price in fiat beside it");
  t.ok(await page.locator("#price").isVisible());
  t.match(await text("#quote"), /^Rate 1 BTC = 50000 USD, held for (9|10):[0-5]\d$/, "the rate and the time left on it");
  const first = await text("#quote-countdown");
  await until("the quote's countdown to tick", async () => (await text("#quote-countdown")) !== first, 3000);
  t.pass("the time left on the quote counts down");
  t.equal(await page.evaluate("document.documentElement.scrollWidth"), 390, "no horizontal scrolling");
  t.same(errors, [], "no script errors or CSP violations");
});

t.test("go-live readiness: Live fails exchange_rates while pricing in fiat has no fresh sources", async (t) => {
  // Merchant a priced intents in fiat above (in Test); its Live key's readiness is held to it.
  const live = await merchantWithKey(app, "live", undefined, a.merchant);
  const readiness = async (key: string, merchant = a.merchant) => (await call(base, "GET", `/api/v1/merchants/${merchant}/go-live/readiness`, { key })).body.data;
  const r = await readiness(live.key);
  const check = r.checks.find((c: { id: string }) => c.id === "exchange_rates");
  t.match(check, { severity: "required", passed: false });
  t.match(check.message, /cannot be quoted in Live now: too few fresh, agreeing rate sources for BTC-USD/);
  t.equal(r.ready, false);
  const test = (await readiness(a.key)).checks.find((c: { id: string }) => c.id === "exchange_rates");
  t.match(test, { severity: "recommended", passed: true }, "Test is quoted by the development source");
  const other = await merchantWithKey(app, "live");
  t.match((await readiness(other.key, other.merchant)).checks.find((c: { id: string }) => c.id === "exchange_rates"), { passed: true, severity: "recommended" }, "a merchant who does not price in fiat is not held to it");
});
