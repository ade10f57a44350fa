// The rate engine (services/rates/engine.ts) against local servers answering the exchanges'
// documented shapes (test/helpers/exchanges.ts): what a refused answer costs a read, and what a
// Live quote needs whatever RATE_MIN_SOURCES says.
import http from "node:http";
import type { AddressInfo } from "node:net";
import { Writable } from "node:stream";
import { pino } from "pino";
import { Registry } from "prom-client";
import t from "tap";
import type { RateSettings } from "../../services/platform/config.ts";
import { liveMinSources, liveRatesRefusal, RateEngine } from "../../services/rates/engine.ts";
import { parseRate } from "../../services/rates/rate-math.ts";
import { fakeExchanges } from "../helpers/exchanges.ts";

const settings = (o: Partial<RateSettings>): RateSettings => ({
  sources: ["kraken", "coinbase", "bitstamp"],
  urls: {},
  refreshSeconds: 60,
  maxAgeSeconds: 300,
  maxSpreadBps: 100,
  minSources: 2,
  stablecoinPeg: true,
  ...o,
});

/** A logger whose lines the test reads. */
function capturedLogger() {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString().split("\n")) if (l.trim() !== "") lines.push(JSON.parse(l) as Record<string, unknown>);
      done();
    },
  });
  return { logger: pino({ level: "debug", base: undefined }, stream), lines };
}

t.test("a kraken answer for another pair is refused: that read fails, counted and logged with its reason, and the others quote", async (t) => {
  const ex = await fakeExchanges({ kraken: { "BTC-USD": "50000.0" }, coinbase: { "BTC-USD": "50010.00" }, bitstamp: { "BTC-USD": "49990.00" } });
  t.teardown(ex.close);
  // A "kraken" that answers every pair with its ETH-USD ticker, as a misrouting proxy would.
  const wrong = http.createServer((_req, res) =>
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ error: [], result: { XETHZUSD: { a: ["2500.0", "1", "1.000"], b: ["2500.0", "1", "1.000"], c: ["2500.0", "0.1"] } } })),
  );
  await new Promise<void>((resolve) => wrong.listen(0, "127.0.0.1", resolve));
  t.teardown(() => new Promise<void>((resolve) => wrong.close(() => resolve())));
  const { logger, lines } = capturedLogger();
  const registry = new Registry();
  const engine = new RateEngine(settings({ urls: { kraken: `http://127.0.0.1:${(wrong.address() as AddressInfo).port}`, coinbase: ex.coinbase.url, bitstamp: ex.bitstamp.url } }), { registry, logger });
  await engine.refresh();
  const q = engine.quote("BTC", "USD", "test");
  t.same(q?.sources, ["bitstamp", "coinbase"], "quoted without kraken");
  t.equal(q?.rate, parseRate("50000"), "the median of the other two");
  const metrics = await registry.metrics();
  t.match(metrics, /rate_source_errors_total\{source="kraken",pair="BTC-USD"\} 1/, "kraken's read counted as failed");
  t.notMatch(metrics, /rate_source_answer_age_seconds\{source="kraken",pair="BTC-USD"\}/, "and no BTC-USD answer of kraken's kept");
  t.match(metrics, /rate_source_answer_age_seconds\{source="kraken",pair="ETH-USD"\}/, "its ETH-USD ticker answers ETH-USD: kept");
  await new Promise((resolve) => setImmediate(resolve));
  const refused = lines.find((l) => l.msg === "rate source answer refused" && l.source === "kraken" && l.pair === "BTC-USD");
  t.match(refused, { level: 40, err: `kraken: answered for the pair "XETHZUSD", not BTC-USD` }, "logged at warn with its reason");
});

t.test("a Live quote needs two agreeing sources whatever RATE_MIN_SOURCES says; a Test one takes the setting", async (t) => {
  const ex = await fakeExchanges({ kraken: { "BTC-USD": "50000.0" }, coinbase: { "BTC-USD": "50010.00" }, bitstamp: { "BTC-USD": "49990.00" } });
  t.teardown(ex.close);
  const one = new RateEngine(settings({ sources: ["kraken"], urls: { kraken: ex.kraken.url }, minSources: 1 }));
  await one.refresh();
  t.same(one.quote("BTC", "USD", "test")?.sources, ["kraken"], "Test: one source, as RATE_MIN_SOURCES=1 says");
  t.equal(one.quote("BTC", "USD", "live"), undefined, "Live: not on one source's word");
  t.match(one.fresh("live"), { ok: false, failing: ["BTC-USD"] }, "go-live readiness sees it");
  const two = new RateEngine(settings({ sources: ["kraken", "coinbase"], urls: { kraken: ex.kraken.url, coinbase: ex.coinbase.url }, minSources: 1 }));
  await two.refresh();
  t.same(two.quote("BTC", "USD", "live")?.sources, ["coinbase", "kraken"], "Live: two agreeing");
  ex.coinbase.down = true;
  const down = new RateEngine(settings({ sources: ["kraken", "coinbase"], urls: { kraken: ex.kraken.url, coinbase: ex.coinbase.url }, minSources: 1 }));
  await down.refresh();
  t.equal(down.quote("BTC", "USD", "live"), undefined, "Live: one of two down is too few");
  t.ok(down.quote("BTC", "USD", "test"), "Test: still quoted");
});

t.test("which rate settings an installation with Live keys refuses at start", async (t) => {
  t.equal(liveMinSources, 2);
  t.equal(
    liveRatesRefusal(settings({ minSources: 1 })),
    "RATE_MIN_SOURCES is 1 and this installation has Live keys: a Live quote needs at least 2 sources to agree; set RATE_SOURCES to 2 or more exchanges (kraken,coinbase,bitstamp) and RATE_MIN_SOURCES to 2 or more",
  );
  t.match(liveRatesRefusal(settings({ sources: ["kraken"], minSources: 1 })), /^RATE_MIN_SOURCES is 1 \(the default with one source\) and this installation has Live keys/);
  t.match(liveRatesRefusal(settings({ sources: ["kraken", "fixed"], minSources: 1 })), /^RATE_MIN_SOURCES is 1 and/);
  t.equal(liveRatesRefusal(settings({ minSources: 2 })), undefined, "two of three: taken");
  t.equal(liveRatesRefusal(settings({ sources: ["fixed"], minSources: 1 })), undefined, "the development source alone prices no Live intent at all: taken (Live creates in fiat are refused)");
});
