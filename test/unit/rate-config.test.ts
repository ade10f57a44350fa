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
  t.match(refused({ RATE_SOURCE_COINBASE_URL: "ftp://x" }), /RATE_SOURCE_COINBASE_URL must be an http\(s\) URL/);
  t.match(refused({ RATE_STABLECOIN_PEG: "yes" }), /RATE_STABLECOIN_PEG must be 1 or 0/);
});

t.test("the pairs read: each asset but pegged stablecoins in each currency, and EUR in USD", async (t) => {
  t.same(pairsToRead(true).map(pairName), ["BTC-USD", "BTC-EUR", "ETH-USD", "ETH-EUR", "SOL-USD", "SOL-EUR", "EUR-USD"]);
  t.same(pairsToRead(false).map(pairName), ["BTC-USD", "BTC-EUR", "ETH-USD", "ETH-EUR", "USDC-USD", "USDC-EUR", "USDT-USD", "USDT-EUR", "SOL-USD", "SOL-EUR"]);
});
