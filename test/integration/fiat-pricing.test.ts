// Fiat-priced intents (issue 49): a price in USD or EUR, quoted from three exchanges faked by
// local servers that answer their documented public shapes (test/helpers/exchanges.ts).
import { createClient, ConnectError, Code } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import t from "tap";
import { IntentService } from "../../gen/payments/v1/payment_intents_pb.ts";
import { ErrorDetailSchema } from "../../gen/payments/v1/options_pb.ts";
import { fakeExchanges } from "../helpers/exchanges.ts";
import { applyPriceSpread } from "../../services/policy/policy.ts";
import { call, idemKey, merchantWithKey, startTestApp, until } from "../helpers/harness.ts";

const btc = (kraken: string, coinbase: string, bitstamp: string) => ({ kraken: { "BTC-USD": kraken }, coinbase: { "BTC-USD": coinbase }, bitstamp: { "BTC-USD": bitstamp } });
const ex = await fakeExchanges(btc("50000.0", "50010.00", "49990.00"));
t.teardown(ex.close);
for (const e of ex.all) {
  e.prices.set("ETH-EUR", "2000.0");
  e.prices.set("EUR-USD", "1.25");
}
// Refreshed every second and stale after two: the source changes below show within seconds.
const { app, base, rpcUrl } = await startTestApp(t, { ...ex.env, RATE_REFRESH_SECONDS: "1", RATE_MAX_AGE_SECONDS: "2", RATE_MAX_SPREAD_BPS: "100" });
const m = await merchantWithKey(app);
const path = `/api/v1/merchants/${m.merchant}/payment-intents`;
const create = (body: Record<string, unknown>, key = idemKey()) => call(base, "POST", path, { key: m.key, idempotencyKey: key, body });
const btcPrice = { network: "bitcoin", asset: "BTC", price_amount: "100.00", price_currency: "USD" };
const count = async () => Number((await app.db.em.fork().execute<{ n: string }[]>("select count(*)::text as n from payment_intents"))[0]?.n);
const keys = async () => Number((await app.db.em.fork().execute<{ n: string }[]>("select count(*)::text as n from idempotency_records"))[0]?.n);

/** Creates until the quote's sources are `sources` (each source change shows at the next refresh). */
async function createQuotedBy(body: Record<string, unknown>, sources: string[]) {
  return until(
    `a quote from ${sources.join(", ")}`,
    async () => {
      const res = await create(body);
      return res.status === 200 && JSON.stringify(res.body.data.quote.sources) === JSON.stringify(sources) && res;
    },
    10_000,
  );
}

t.test("BTC priced 100.00 USD at 50,000 / 50,010 / 49,990: 0.002 BTC at the median", async (t) => {
  const res = await createQuotedBy(btcPrice, ["bitstamp", "coinbase", "kraken"]);
  const pi = res.body.data;
  t.equal(pi.requested_amount, "0.002");
  t.equal(pi.price_amount, "100.00");
  t.equal(pi.price_currency, "USD");
  t.equal(pi.quote.rate, "50000");
  t.equal(pi.quote.expires_at, pi.expires_at, "the quote holds for the payment window");
  t.ok(Date.parse(pi.quote.quoted_at) <= Date.parse(pi.created_at) + 1000);
  // The payment URI asks for the computed amount.
  t.match(pi.payment_uri, /amount=0\.002\b/);
  const got = await call(base, "GET", `${path}/${pi.public_id}`, { key: m.key });
  t.same(got.body.data.quote, pi.quote, "a read shows the stored quote");
  const [event] = await app.db.em.fork().execute<{ payload: string }[]>(`select payload from webhook_events where payment_intent_id = ? and type = 'payment.intent.created'`, [
    pi.public_id,
  ]);
  t.match((JSON.parse(event?.payload ?? "{}") as { data: { payment_intent: unknown } }).data.payment_intent, { price_amount: "100.00", price_currency: "USD", quote: pi.quote }, "payment.intent.created carries the price and the quote");
});

t.test("a shop price such as 19.99 USD", async (t) => {
  const res = await createQuotedBy({ ...btcPrice, price_amount: "19.99" }, ["bitstamp", "coinbase", "kraken"]);
  // 19.99 / 50000 = 0.0003998 exactly.
  t.equal(res.body.data.requested_amount, "0.0003998");
});

t.test("EUR pricing for ETH", async (t) => {
  const res = await createQuotedBy({ network: "ethereum", asset: "ETH", price_amount: "10.00", price_currency: "EUR" }, ["bitstamp", "coinbase", "kraken"]);
  t.equal(res.body.data.requested_amount, "0.005");
  t.equal(res.body.data.quote.rate, "2000");
  t.equal(res.body.data.price_currency, "EUR");
});

t.test("USDC priced in EUR uses the EUR/USD rate", async (t) => {
  const res = await createQuotedBy({ network: "ethereum", asset: "USDC", price_amount: "10.00", price_currency: "EUR" }, ["bitstamp", "coinbase", "kraken"]);
  // 1 EUR = 1.25 USD, so 1 USDC = 0.8 EUR and 10 EUR = 12.5 USDC.
  t.equal(res.body.data.quote.rate, "0.8");
  t.equal(res.body.data.requested_amount, "12.5");
});

t.test("one source down: quoted from the other two", async (t) => {
  ex.coinbase.down = true;
  t.teardown(() => void (ex.coinbase.down = false));
  const res = await createQuotedBy(btcPrice, ["bitstamp", "kraken"]);
  t.equal(res.body.data.quote.rate, "49995");
  // 100 / 49995 = 0.0020002000200…: rounded up to 0.00200021 (8 places), never down.
  t.equal(res.body.data.requested_amount, "0.00200021");
});

t.test("one source answering 60,000: dropped as an outlier", async (t) => {
  ex.coinbase.prices.set("BTC-USD", "60000.00");
  t.teardown(() => void ex.coinbase.prices.set("BTC-USD", "50010.00"));
  const res = await createQuotedBy(btcPrice, ["bitstamp", "kraken"]);
  t.equal(res.body.data.quote.rate, "49995");
  // Counted as the refresh that read it ends, which may be just after the create.
  const metrics = await until(
    "the outlier counted",
    async () => {
      const text = await (await fetch(`http://127.0.0.1:${app.ports.ops}/metrics`)).text();
      return /rate_source_outliers_total\{source="coinbase",pair="BTC-USD"\} [1-9]/.test(text) && text;
    },
    5_000,
  );
  t.match(metrics, /rate_source_answer_age_seconds\{source="kraken",pair="BTC-USD"\} /);
});

t.test("an idempotent replay returns the same quote, whatever the market did since", async (t) => {
  const key = idemKey();
  await createQuotedBy(btcPrice, ["bitstamp", "coinbase", "kraken"]);
  const again = await create(btcPrice, key);
  for (const e of ex.all) e.prices.set("BTC-USD", "40000.0");
  t.teardown(() => {
    ex.kraken.prices.set("BTC-USD", "50000.0");
    ex.coinbase.prices.set("BTC-USD", "50010.00");
    ex.bitstamp.prices.set("BTC-USD", "49990.00");
  });
  await until("the new market rate", async () => (await create(btcPrice)).body.data?.quote?.rate === "40000", 10_000);
  const replay = await create(btcPrice, key);
  t.equal(replay.headers.get("idempotent-replayed"), "true");
  t.same(replay.body, again.body, "the same intent, amount and quote");
  t.equal(replay.body.data.quote.rate, "50000");
});

t.test("all sources down: 503 rate_unavailable with Retry-After, nothing recorded; USDC in USD still 1:1", async (t) => {
  for (const e of ex.all) e.down = true;
  t.teardown(() => {
    for (const e of ex.all) e.down = false;
  });
  // Each try under a new key: one answered before the answers went stale would replay.
  const refused = await until(
    "rate_unavailable",
    async () => {
      const res = await create(btcPrice);
      return res.status === 503 && res;
    },
    10_000,
  );
  const key = idemKey();
  const [intents, records] = [await count(), await keys()];
  const res = await create(btcPrice, key);
  t.equal(res.status, 503);
  t.equal(res.body.error.code, "rate_unavailable");
  t.equal(res.body.error.param, "price_currency");
  t.match(res.body.error.request_id, /^req_/);
  t.match(res.headers.get("retry-after"), /^[1-9][0-9]*$/);
  // Each exchange answers 503: reachable, so retrying later helps, and the message says who does not answer.
  t.match(res.body.error.message, /^No BTC rate in USD now: 0 exchange rate sources answer and \d must agree; not answering: kraken \(HTTP 503\), coinbase \(HTTP 503\), bitstamp \(HTTP 503\)\. Nothing was created; retry later\.$/);
  t.equal(await count(), intents, "no intent");
  t.equal(await keys(), records, "no idempotency record: the same key may be retried");
  t.equal(refused.body.error.code, "rate_unavailable");

  // A stablecoin priced in USD needs no rate.
  const usdc = await create({ network: "ethereum", asset: "USDC", price_amount: "12.50", price_currency: "USD" });
  t.equal(usdc.status, 200);
  t.equal(usdc.body.data.requested_amount, "12.5");
  t.same(usdc.body.data.quote.sources, ["peg"]);
  t.equal(usdc.body.data.quote.rate, "1");

  // gRPC: Unavailable with the ErrorDetail rate_unavailable and a retry-after.
  const client = createClient(IntentService, createGrpcTransport({ baseUrl: rpcUrl }));
  const err = await client
    .createPaymentIntent({ merchant: m.merchant, network: "bitcoin", asset: "BTC", priceAmount: "100.00", priceCurrency: "USD" }, { headers: { authorization: `Bearer ${m.key}`, "idempotency-key": idemKey() } })
    .then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
  t.equal(err?.code, Code.Unavailable);
  t.equal(err?.findDetails(ErrorDetailSchema)[0]?.code, "rate_unavailable");
  t.match(err?.metadata.get("retry-after"), /^[1-9][0-9]*$/);

  // Back up: the same key now creates.
  for (const e of ex.all) e.down = false;
  const later = await until("a quote again", async () => {
    const r = await create(btcPrice, key);
    return r.status === 200 && r;
  }, 10_000);
  t.equal(later.body.data.requested_amount, "0.002");
});

t.test("a payment's value in the price currency", async (t) => {
  const res = await createQuotedBy(btcPrice, ["bitstamp", "coinbase", "kraken"]);
  const id = res.body.data.public_id;
  const sim = await call(base, "POST", `/api/v1/sandbox/merchants/${m.merchant}/payment-intents/${id}/simulate`, { key: m.key, body: { outcome: "underpaid", amount: "0.0015" } });
  t.equal(sim.status, 200, JSON.stringify(sim.body));
  const got = await call(base, "GET", `${path}/${id}`, { key: m.key });
  const tx = got.body.data.transactions[0];
  t.equal(tx.amount, "0.0015");
  t.equal(tx.fiat_value, "75", "0.0015 BTC at 50,000 USD");
});

t.test("bad prices are 400s naming the field", async (t) => {
  const cases: [Record<string, unknown>, string][] = [
    [{ ...btcPrice, requested_amount: "0.002" }, "price_amount"],
    [{ network: "bitcoin", asset: "BTC", price_amount: "100.00", price_currency: "GBP" }, "price_currency"],
    [{ network: "bitcoin", asset: "BTC", price_amount: "100.001", price_currency: "USD" }, "price_amount"],
    [{ network: "bitcoin", asset: "BTC", price_amount: "100.00" }, "price_currency"],
    [{ network: "bitcoin", asset: "BTC", price_currency: "USD" }, "price_amount"],
    [{ network: "bitcoin", asset: "BTC" }, "requested_amount"],
    [{ network: "bitcoin", asset: "BTC", price_amount: "-1", price_currency: "USD" }, "price_amount"],
  ];
  const before = await count();
  for (const [body, param] of cases) {
    const res = await create(body);
    t.equal(res.status, 400, JSON.stringify(body));
    t.equal(res.body.error.code, "validation_failed");
    t.equal(res.body.error.param, param, `${JSON.stringify(body)}: ${res.body.error.message}`);
  }
  t.equal(await count(), before);
});

t.test("a merchant's price spread comes off the quoted rate: its shoppers pay that much more", async (t) => {
  const owner = { merchantId: m.merchant, environment: "test" as const };
  const policy = await applyPriceSpread(app.db.em.fork(), owner, 100);
  t.equal(policy.price_spread_bps, 100);
  t.teardown(() => applyPriceSpread(app.db.em.fork(), owner, 0));
  const res = await createQuotedBy(btcPrice, ["bitstamp", "coinbase", "kraken"]);
  t.equal(res.body.data.quote.rate, "49500", "50,000 less 1 %");
  // 100 / 49500 = 0.0020202020…, rounded up.
  t.equal(res.body.data.requested_amount, "0.00202021");
  const bad = await applyPriceSpread(app.db.em.fork(), owner, 1001).catch((e: unknown) => e);
  t.match(String(bad), /price_spread_bps/);
});

t.test("a late payment is valued at the market's rate when it is seen, not at the expired quote", async (t) => {
  const res = await createQuotedBy(btcPrice, ["bitstamp", "coinbase", "kraken"]);
  const pi = res.body.data;
  t.equal(pi.quote.rate, "50000");
  // The market falls to 40,000 after the quote was made.
  const before = ex.all.map((e) => e.prices.get("BTC-USD"));
  for (const e of ex.all) e.prices.set("BTC-USD", "40000.0");
  t.teardown(() => ex.all.forEach((e, i) => e.prices.set("BTC-USD", before[i]!)));
  await until("the engine quotes 40,000", async () => {
    const probe = await create(btcPrice);
    return probe.status === 200 && probe.body.data.quote.rate === "40000";
  }, 10_000);
  // Paid in full after its window: late.
  const sim = await call(base, "POST", `/api/v1/sandbox/merchants/${m.merchant}/payment-intents/${pi.public_id}/simulate`, { key: m.key, body: { outcome: "late", amount: "0.002" } });
  t.equal(sim.status, 200, JSON.stringify(sim.body));
  t.equal(sim.body.data.status, "late");
  t.equal(sim.body.data.transactions[0].fiat_value, "80", "0.002 BTC at 40,000 USD, the rate when it was seen");
  t.equal(sim.body.data.quote.rate, "50000", "the intent's quote is unchanged");
  // Fixed once: the market moving again does not move it.
  for (const e of ex.all) e.prices.set("BTC-USD", "45000.0");
  await until("the engine quotes 45,000", async () => {
    const probe = await create(btcPrice);
    return probe.status === 200 && probe.body.data.quote.rate === "45000";
  }, 10_000);
  const got = await call(base, "GET", `${path}/${pi.public_id}`, { key: m.key });
  t.equal(got.body.data.transactions[0].fiat_value, "80", "kept as it was first valued");
});
