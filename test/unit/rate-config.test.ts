// The RATE_* settings (services/platform/config.ts) and the pairs the engine reads (services/rates/engine.ts).
import t from "tap";
import { ConfigError, loadConfig } from "../../services/platform/config.ts";
import { pairsToRead } from "../../services/rates/engine.ts";
import { pairName } from "../../services/rates/sources.ts";

function refused(env: Record<string, string>): string {
  try {
    loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) return err.message;
    throw err;
  }
  return "";
}

t.test("defaults: the three public exchanges, two of them to agree, stablecoins pegged", async (t) => {
  const { rates } = loadConfig({});
  t.same(rates, { sources: ["kraken", "coinbase", "bitstamp"], urls: {}, refreshSeconds: 60, maxAgeSeconds: 300, maxSpreadBps: 100, minSources: 2, stablecoinPeg: true });
  t.equal(loadConfig({ RATE_SOURCES: "fixed" }).rates.minSources, 1, "one source: one is enough");
  t.equal(loadConfig({ RATE_SOURCES: "kraken, Coinbase" }).rates.minSources, 2);
});

t.test("every setting is checked at start, naming itself", async (t) => {
  t.same(loadConfig({ RATE_SOURCE_KRAKEN_URL: "http://127.0.0.1:9/" }).rates.urls, { kraken: "http://127.0.0.1:9" });
  t.same(
    { refresh: loadConfig({ RATE_REFRESH_SECONDS: "1", RATE_MAX_AGE_SECONDS: "1" }).rates.refreshSeconds, peg: loadConfig({ RATE_STABLECOIN_PEG: "0" }).rates.stablecoinPeg },
    { refresh: 1, peg: false },
    "1 s is accepted (tests run fast), the peg can be switched off",
  );
  t.match(refused({ RATE_SOURCES: "kraken,binance" }), /RATE_SOURCES takes kraken, coinbase, bitstamp, fixed .* got "binance"/);
  t.match(refused({ RATE_SOURCES: "kraken,kraken" }), /names a source twice/);
  t.match(refused({ RATE_SOURCES: " , " }), /RATE_SOURCES must name at least one/);
  t.match(refused({ RATE_MAX_AGE_SECONDS: "0" }), /RATE_MAX_AGE_SECONDS must be between 1 and/);
  t.match(refused({ RATE_REFRESH_SECONDS: "0" }), /RATE_REFRESH_SECONDS must be between 1 and/);
  t.match(refused({ RATE_MIN_SOURCES: "4" }), /RATE_MIN_SOURCES must be between 1 and 3/);
  t.match(refused({ RATE_MAX_SPREAD_BPS: "x" }), /RATE_MAX_SPREAD_BPS must be a whole number/);
  t.equal(refused({ RATE_SOURCE_COINBASE_URL: "ftp://x" }), "RATE_SOURCE_COINBASE_URL must be an http(s) URL of the exchange's API, got the scheme ftp");
  t.match(refused({ RATE_STABLECOIN_PEG: "yes" }), /RATE_STABLECOIN_PEG must be 1 or 0/);
});

t.test("an exchange's URL is https, unless on this machine (a local fake in tests): every exchange's rates price Live intents", async (t) => {
  t.equal(
    refused({ RATE_SOURCE_KRAKEN_URL: "http://10.0.0.5:8080/kraken?token=s3cret" }),
    "RATE_SOURCE_KRAKEN_URL must be https to a host other than this machine (10.0.0.5 over http): anyone on the path could answer for an exchange whose rates price Live intents",
    "plain http to another host: refused, naming the setting and the host only",
  );
  t.match(refused({ RATE_SOURCE_BITSTAMP_URL: "http://rates-proxy.internal" }), /^RATE_SOURCE_BITSTAMP_URL must be https to a host other than this machine \(rates-proxy\.internal over http\)/);
  t.equal(refused({ RATE_SOURCE_COINBASE_URL: "https://user:s3cret@proxy.example" }), "RATE_SOURCE_COINBASE_URL must not carry a user or password: the exchanges' public APIs take none");
  t.equal(refused({ RATE_SOURCE_COINBASE_URL: "not a url s3cret" }), "RATE_SOURCE_COINBASE_URL must be an absolute http(s) URL of the exchange's API", "the value is not repeated");
  t.same(
    loadConfig({
      RATE_SOURCE_KRAKEN_URL: "https://kraken-proxy.example/",
      RATE_SOURCE_COINBASE_URL: "http://localhost:9001",
      RATE_SOURCE_BITSTAMP_URL: "http://[::1]:9002",
    }).rates.urls,
    { kraken: "https://kraken-proxy.example", coinbase: "http://localhost:9001", bitstamp: "http://[::1]:9002" },
    "https anywhere, http on loopback",
  );
  t.same(loadConfig({ RATE_SOURCE_KRAKEN_URL: "http://127.0.0.2:9" }).rates.urls, { kraken: "http://127.0.0.2:9" }, "all of 127/8 is this machine");
});

t.test("the pairs read: each asset but pegged stablecoins in each currency, and EUR in USD", async (t) => {
  t.same(pairsToRead(true).map(pairName), ["BTC-USD", "BTC-EUR", "ETH-USD", "ETH-EUR", "SOL-USD", "SOL-EUR", "EUR-USD"]);
  t.same(pairsToRead(false).map(pairName), ["BTC-USD", "BTC-EUR", "ETH-USD", "ETH-EUR", "USDC-USD", "USDC-EUR", "USDT-USD", "USDT-EUR", "SOL-USD", "SOL-EUR"]);
});
