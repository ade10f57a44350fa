// A quote has its own life (issue 61): a fiat-priced intent's quote holds for QUOTE_SECONDS, then
// what is still due is quoted again at the rate of the moment (the API, a payment.requoted event in
// its timeline, and the checkout page's amount); a payment made under the replaced quote within
// QUOTE_GRACE_SECONDS still counts at it, one made later counts at the new quote; with no fresh rate
// the lapsed quote stands; QUOTE_SECONDS beyond the longest intent is refused at start. Rates come
// from three exchanges faked by local servers answering their documented shapes
// (test/helpers/exchanges.ts); short settings (a 4 s quote, 3 s of grace) keep it quick.
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { chromium } from "playwright-core";
import t from "tap";
import { intentOutputs } from "../../services/chains/outputs.ts";
import { Intents } from "../../services/intents/intents.ts";
import { requoteDue } from "../../services/intents/requote.ts";
import { IntentViews } from "../../services/intents/views.ts";
import { RateEngine } from "../../services/rates/engine.ts";
import { fakeExchanges } from "../helpers/exchanges.ts";
import { dashboardClient } from "../helpers/dashboard.ts";
import { call, idemKey, merchantWithKey, startTestApp, until } from "../helpers/harness.ts";
import { spawnService } from "../helpers/processes.ts";

const quoteSeconds = 4;
const graceSeconds = 3;
const ex = await fakeExchanges({ kraken: { "BTC-USD": "50000.0" }, coinbase: { "BTC-USD": "50000.00" }, bitstamp: { "BTC-USD": "50000.00" } });
t.teardown(ex.close);
// Rates refreshed every second and stale after two, so a market move or an outage shows within seconds.
const { app, base } = await startTestApp(t, {
  ...ex.env,
  RATE_REFRESH_SECONDS: "1",
  RATE_MAX_AGE_SECONDS: "2",
  RATE_MAX_SPREAD_BPS: "100",
  QUOTE_SECONDS: String(quoteSeconds),
  QUOTE_GRACE_SECONDS: String(graceSeconds),
  CHECKOUT_BASE_URL: "http://127.0.0.1/checkout",
  DASHBOARD_BASE_URL: "http://127.0.0.1/dashboard",
});
const m = await merchantWithKey(app);
const path_ = `/api/v1/merchants/${m.merchant}/payment-intents`;
const btcPrice = { network: "bitcoin", asset: "BTC", price_amount: "100.00", price_currency: "USD", expires_in_seconds: 600 };
const create = (body: Record<string, unknown>) => call(base, "POST", path_, { key: m.key, idempotencyKey: idemKey(), body });
const read = async (id: string) => (await call(base, "GET", `${path_}/${id}`, { key: m.key })).body.data;
const simulate = (id: string, outcome: string, amount: string) =>
  call(base, "POST", `/api/v1/sandbox/merchants/${m.merchant}/payment-intents/${id}/simulate`, { key: m.key, body: { outcome, amount } });
const ms = (iso: string) => Date.parse(iso);

interface Quote {
  rate: string;
  sources: string[];
  quoted_at: string;
  expires_at: string;
}
interface Intent {
  public_id: string;
  status: string;
  requested_amount: string;
  amount_due: string;
  payment_uri: string;
  expires_at: string;
  quote: Quote;
  transactions: { amount: string; fiat_value?: string | null }[];
}

/** Every source at `rate`, once the engine quotes it (a probe create shows the engine's rate). */
async function market(rate: string) {
  for (const e of ex.all) {
    e.prices.set("BTC-USD", rate);
    e.down = false;
  }
  await until(`the engine quoting ${rate}`, async () => {
    const probe = await create(btcPrice);
    return probe.status === 200 && probe.body.data.quote.rate === rate;
  }, 10_000);
}

/** A 100.00 USD intent quoted at 50,000: 0.002 BTC. */
async function quotedAt50k(): Promise<Intent> {
  await market("50000");
  const res = await create(btcPrice);
  t.equal(res.status, 200);
  return res.body.data as Intent;
}

/** The intent once a quote at `rate` has replaced the one it was created with. */
const requotedTo = (id: string, rate: string) =>
  until(`${id} re-quoted at ${rate}`, async () => {
    const got = (await read(id)) as Intent;
    return got.quote.rate === rate && got;
  }, 15_000);

interface StoredEvent {
  type: string;
  data: { payment_intent: Intent; requote?: { previous_quote: Quote; previous_requested_amount: string; previous_amount_due: string; grace_ends_at: string } };
}
async function eventsOf(id: string, type: string): Promise<StoredEvent[]> {
  const rows = await app.db.em.fork().execute<{ payload: string }[]>(`select payload from webhook_events where payment_intent_id = ? and type = ? order by created_at, id`, [id, type]);
  return rows.map((r) => JSON.parse(r.payload) as StoredEvent);
}

const checkoutPage = async (id: string) => (await fetch(`${base}/checkout/${id}`)).text();
const textOf = (html: string, id: string) => new RegExp(`id="${id}"[^>]*>([^<]*)<`).exec(html)?.[1];

t.test("a lapsed quote is renewed at the market's new rate: the API, the event and the checkout page", async (t) => {
  const pi = await quotedAt50k();
  t.equal(pi.requested_amount, "0.002");
  t.equal(ms(pi.quote.expires_at) - ms(pi.quote.quoted_at), quoteSeconds * 1000, "the quote holds for QUOTE_SECONDS");
  t.ok(ms(pi.quote.expires_at) < ms(pi.expires_at), "not for the intent's whole life");
  t.equal(textOf(await checkoutPage(pi.public_id), "amount"), "0.002");

  // The market falls to 40,000: what is due is 100 USD at it once the quote lapses.
  await market("40000");
  const renewed = await requotedTo(pi.public_id, "40000");
  t.equal(renewed.status, "pending");
  t.equal(renewed.requested_amount, "0.0025", "100 USD at 40,000");
  t.equal(renewed.amount_due, "0.0025");
  t.match(renewed.payment_uri, /amount=0\.0025\b/, "the payment URI asks for the new amount");
  t.same(renewed.quote.sources, ["bitstamp", "coinbase", "kraken"]);
  t.ok(ms(renewed.quote.quoted_at) >= ms(pi.quote.expires_at), "quoted once the old one lapsed");
  t.equal(ms(renewed.quote.expires_at) - ms(renewed.quote.quoted_at), quoteSeconds * 1000, "a new quote with its own expiry");
  t.equal(renewed.expires_at, pi.expires_at, "the intent's own expiry does not move");

  // The timeline: payment.requoted, with the quote it replaced.
  const events = await eventsOf(pi.public_id, "payment.requoted");
  const at40k = events.find((e) => e.data.payment_intent.quote.rate === "40000");
  t.ok(at40k, "payment.requoted for the new rate");
  t.match(at40k?.data.payment_intent, { status: "pending", requested_amount: "0.0025", amount_due: "0.0025", quote: { rate: "40000" } });
  t.match(at40k?.data.requote, { previous_quote: { rate: "50000" }, previous_requested_amount: "0.002", previous_amount_due: "0.002", grace_ends_at: String });
  const grace = at40k?.data.requote;
  t.equal(ms(grace?.grace_ends_at ?? "") - ms(at40k?.data.payment_intent.quote.quoted_at ?? ""), graceSeconds * 1000, "the grace runs from the replacement");
  const c = dashboardClient(base);
  t.equal((await c.signIn(m.key)).status, 303);
  const page = await c.get(`/dashboard/payments/${pi.public_id}`);
  t.match(/<ol class="timeline" id="timeline">([\s\S]*?)<\/ol>/.exec(page.body)?.[1] ?? "", "payment.requoted", "the dashboard's timeline shows it");

  // The checkout page and its status JSON ask for the new amount.
  const html = await checkoutPage(pi.public_id);
  t.equal(textOf(html, "amount"), "0.0025", "the checkout page's amount");
  t.equal(textOf(html, "quote-rate"), "40000");
  t.match(html, /data-amount="0\.0025"/, "its QR code asks for it");
  const status = await (await fetch(`${base}/checkout/${pi.public_id}/status.json`)).json();
  t.match(status, { status: "pending", amount_due: "0.0025", requested_amount: "0.0025", quote: { rate: "40000" } });
});

t.test("a payment under the old quote, seen within the grace, still counts at it", async (t) => {
  const pi = await quotedAt50k();
  await market("40000");
  const renewed = await requotedTo(pi.public_id, "40000");
  t.equal(renewed.requested_amount, "0.0025");
  // The shopper pays what the page said before the lapse, just after it.
  const sim = await simulate(pi.public_id, "confirmed", "0.002");
  t.ok(Date.now() < ms(renewed.quote.quoted_at) + graceSeconds * 1000, "paid within the grace");
  t.equal(sim.status, 200, JSON.stringify(sim.body));
  const paid = (await read(pi.public_id)) as Intent;
  t.equal(paid.status, "confirmed", "paid in full at the old quote");
  t.equal(paid.amount_due, "0");
  t.equal(paid.requested_amount, "0.002", "what the old quote asked");
  t.equal(paid.transactions[0]?.fiat_value, "100", "valued at the old quote: 0.002 BTC at 50,000 USD");
  t.equal((await eventsOf(pi.public_id, "payment.confirmed")).length, 1);
});

t.test("a payment of the old amount after the grace counts at the new quote: underpaid", async (t) => {
  const pi = await quotedAt50k();
  await market("40000");
  const renewed = await requotedTo(pi.public_id, "40000");
  const graceEnds = ms(renewed.quote.quoted_at) + graceSeconds * 1000;
  await until("the grace over", async () => Date.now() > graceEnds + 200, 10_000);
  const sim = await simulate(pi.public_id, "underpaid", "0.002");
  t.equal(sim.status, 200, JSON.stringify(sim.body));
  const short = (await read(pi.public_id)) as Intent;
  t.equal(short.status, "underpaid", "0.002 BTC is 80 USD at the new quote");
  t.equal(short.amount_due, "0.0005", "the rest at 40,000");
  t.equal(short.transactions[0]?.fiat_value, "80", "valued at the new quote");
  t.equal((await eventsOf(pi.public_id, "payment.underpaid")).length, 1);

  // The rest, paid under the next quotes: confirmed.
  const rest = await simulate(pi.public_id, "confirmed", short.amount_due);
  t.equal(rest.status, 200, JSON.stringify(rest.body));
  t.equal(((await read(pi.public_id)) as Intent).status, "confirmed");
});

t.test("no fresh rate when the quote lapses: it stands, the page says the rate is being updated, and the next fresh rate replaces it", async (t) => {
  const pi = await quotedAt50k();
  for (const e of ex.all) e.down = true;
  t.teardown(() => {
    for (const e of ex.all) e.down = false;
  });
  await until("rate_unavailable", async () => (await create(btcPrice)).status === 503, 10_000);
  await until("the quote lapsed", async () => Date.now() > ms(pi.quote.expires_at) + 100, 10_000);

  // A sweep with no fresh rate for the pair (its sources down too) takes nothing.
  const engine = new RateEngine({ sources: ["kraken", "coinbase", "bitstamp"], urls: { kraken: ex.kraken.url, coinbase: ex.coinbase.url, bitstamp: ex.bitstamp.url }, refreshSeconds: 60, maxAgeSeconds: 60, maxSpreadBps: 100, minSources: 2, stablecoinPeg: true });
  await engine.refresh();
  const mine = new Intents(new IntentViews("https://checkout.example.test"), undefined, engine, { seconds: quoteSeconds, graceSeconds });
  t.same(await requoteDue(app.db.em.fork(), mine, intentOutputs), { claimed: 0, requoted: 0 }, "nothing to quote with");

  const stale = (await read(pi.public_id)) as Intent;
  t.same(stale.quote, pi.quote, "the lapsed quote stands, its expires_at in the past");
  t.equal(stale.requested_amount, "0.002");
  const html = await checkoutPage(pi.public_id);
  t.match(html, /<p class="note" id="quote-lapsed" role="status" aria-live="polite">Updating the rate/, "the page says the rate is being updated");
  t.equal(textOf(html, "amount"), "0.002", "and still shows the amount of the quote that stands");

  await market("40000");
  const renewed = await requotedTo(pi.public_id, "40000");
  t.equal(renewed.requested_amount, "0.0025");
  t.notMatch(await checkoutPage(pi.public_id), /id="quote-lapsed" role="status" aria-live="polite">/, "the note is hidden again");
});

t.test("QUOTE_SECONDS longer than an intent can live is refused at start, with one line saying why", async (t) => {
  const dataDir = mkdtempSync(path.join(tmpdir(), "test-quotes-"));
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  const p = spawnService(t, ["rpc"], { QUOTE_SECONDS: "86401", DATA_DIR: dataDir, PORT: "0", RPC_PORT: "0", OPS_PORT: "0", LOG_LEVEL: "warn" });
  t.equal(await Promise.race([p.exited, p.started.then(() => "started")]), 1, "exits 1, never started");
  t.same(
    p.output().split("\n").filter((l) => l.trim() !== ""),
    ["payments: QUOTE_SECONDS must be at most 86400, the longest expiry an intent can have (expires_in_seconds): a quote never outlives its intent, got 86401"],
  );
});

const executablePath = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const noBrowser = existsSync(executablePath) ? false : `no Chromium at ${executablePath}: install it (apt-get install chromium) or set CHROMIUM_PATH`;

t.test("an open checkout page follows the new quote without a reload", { skip: noBrowser }, async (t) => {
  const pi = await quotedAt50k();
  const browser = await chromium.launch({ executablePath, args: ["--no-sandbox"] });
  t.teardown(() => browser.close());
  const page = await (await browser.newContext({ viewport: { width: 390, height: 844 }, locale: "en-US" })).newPage();
  const errors: string[] = [];
  page.on("pageerror", (err) => errors.push(err.message));
  t.equal((await page.goto(`${base}/checkout/${pi.public_id}`))?.status(), 200);
  const text = async (selector: string) => ((await page.locator(selector).textContent()) ?? "").trim();
  t.equal(await text("#amount"), "0.002");
  t.match(await text("#quote"), /^Rate 1 BTC = 50000 USD, held for 0:0[0-4]$/, "the quote's own time left");
  await market("40000");
  await until("the page's amount at the new quote", async () => (await text("#amount")) === "0.0025", 20_000);
  t.equal(await text("#quote-rate"), "40000");
  t.match(await text("#status-detail"), /Send exactly 0\.0025 BTC/);
  await until("its QR code asking for the new amount", async () => (await page.locator("#qr").getAttribute("data-amount")) === "0.0025", 10_000);
  t.same(errors, [], "no script errors");
});
