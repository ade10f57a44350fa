/**
 * Where rates come from: each exchange's documented public, keyless ticker endpoint, read over
 * http(s). A source answers one pair at a time with the price of one `base` in `quote`, as the
 * decimal string the exchange wrote; anything else it answers is an error (counted, not used).
 */

/** A pair as the sources are asked for it: the price of one `base` in `quote`. */
export interface Pair {
  base: string;
  quote: string;
}

export const pairName = (p: Pair) => `${p.base}-${p.quote}`;

export interface RateSource {
  readonly name: string;
  /** Answers only in the Test environment (the development source). */
  readonly testOnly: boolean;
  read(pair: Pair, signal: AbortSignal): Promise<string>;
}

/** The exchanges, with their public API's base URL (RATE_SOURCE_<NAME>_URL overrides it). */
export const exchangeSources = ["kraken", "coinbase", "bitstamp"] as const;
export type ExchangeName = (typeof exchangeSources)[number];
export const defaultSourceUrls: Readonly<Record<ExchangeName, string>> = {
  kraken: "https://api.kraken.com",
  coinbase: "https://api.coinbase.com",
  bitstamp: "https://www.bitstamp.net",
};

/** An exchange's answer is small; a longer one is not a ticker. */
const maxAnswerBytes = 64 * 1024;

async function getJson(url: string, signal: AbortSignal): Promise<unknown> {
  const res = await fetch(url, { signal, headers: { accept: "application/json" }, redirect: "error" });
  const text = await res.text();
  if (!res.ok) throw new Error(`HTTP ${res.status}`);
  if (text.length > maxAnswerBytes) throw new Error("answer too long");
  return JSON.parse(text) as unknown;
}

const field = (v: unknown, key: string): unknown => (v !== null && typeof v === "object" ? (v as Record<string, unknown>)[key] : undefined);

function decimal(v: unknown, what: string): string {
  if (typeof v !== "string" || !/^[0-9]+(\.[0-9]+)?$/.test(v)) throw new Error(`no price in ${what}`);
  return v;
}

/**
 * Kraken, GET /0/public/Ticker?pair=XBTUSD (docs.kraken.com, "Get Ticker Information"):
 * {"error":[],"result":{"XXBTZUSD":{"a":[…],"b":[…],"c":["<last trade price>","<lot volume>"],…}}}.
 * Kraken calls bitcoin XBT, and names the result by its own pair name, so the one result is read.
 */
export function kraken(baseUrl: string): RateSource {
  const symbol = (s: string) => (s === "BTC" ? "XBT" : s);
  return {
    name: "kraken",
    testOnly: false,
    async read(pair, signal) {
      const body = await getJson(`${baseUrl}/0/public/Ticker?pair=${symbol(pair.base)}${symbol(pair.quote)}`, signal);
      const errors = field(body, "error");
      if (Array.isArray(errors) && errors.length > 0) throw new Error(`kraken: ${String(errors[0]).slice(0, 100)}`);
      const result = field(body, "result");
      const tickers = result !== null && typeof result === "object" ? Object.values(result) : [];
      if (tickers.length !== 1) throw new Error("kraken: not one ticker in result");
      const last = field(tickers[0], "c");
      return decimal(Array.isArray(last) ? last[0] : undefined, "kraken's result.c");
    },
  };
}

/**
 * Coinbase, GET /v2/prices/BTC-USD/spot (docs.cdp.coinbase.com, "Get Spot Price"):
 * {"data":{"amount":"50000.00","base":"BTC","currency":"USD"}}. The base and currency are checked.
 */
export function coinbase(baseUrl: string): RateSource {
  return {
    name: "coinbase",
    testOnly: false,
    async read(pair, signal) {
      const data = field(await getJson(`${baseUrl}/v2/prices/${pair.base}-${pair.quote}/spot`, signal), "data");
      if (field(data, "base") !== pair.base || field(data, "currency") !== pair.quote) throw new Error("coinbase: another pair answered");
      return decimal(field(data, "amount"), "coinbase's data.amount");
    },
  };
}

/**
 * Bitstamp, GET /api/v2/ticker/btcusd/ (bitstamp.net/api, "Ticker"):
 * {"timestamp":"…","open":"…","high":"…","low":"…","last":"50000.00","volume":"…","vwap":"…","bid":"…","ask":"…",…}.
 */
export function bitstamp(baseUrl: string): RateSource {
  return {
    name: "bitstamp",
    testOnly: false,
    async read(pair, signal) {
      const body = await getJson(`${baseUrl}/api/v2/ticker/${pair.base.toLowerCase()}${pair.quote.toLowerCase()}/`, signal);
      return decimal(field(body, "last"), "bitstamp's last");
    },
  };
}

/**
 * Fixed rates for development with no internet (RATE_SOURCES=fixed): round numbers, not the
 * market's, so it answers in the Test environment only and a Live create never sees them.
 */
export const fixedRates: Readonly<Record<string, string>> = {
  "BTC-USD": "50000",
  "BTC-EUR": "46000",
  "ETH-USD": "2500",
  "ETH-EUR": "2300",
  "SOL-USD": "150",
  "SOL-EUR": "138",
  "EUR-USD": "1.08",
  // Read only with RATE_STABLECOIN_PEG=0.
  "USDC-USD": "1",
  "USDC-EUR": "0.925",
  "USDT-USD": "1",
  "USDT-EUR": "0.925",
};

export function fixed(): RateSource {
  return {
    name: "fixed",
    testOnly: true,
    async read(pair) {
      const rate = fixedRates[pairName(pair)];
      if (rate === undefined) throw new Error(`fixed: no rate for ${pairName(pair)}`);
      return rate;
    },
  };
}

export type SourceName = ExchangeName | "fixed";
export const sourceNames: readonly SourceName[] = [...exchangeSources, "fixed"];

export function sourceFor(name: SourceName, urls: Readonly<Partial<Record<ExchangeName, string>>>): RateSource {
  switch (name) {
    case "kraken":
      return kraken(urls.kraken ?? defaultSourceUrls.kraken);
    case "coinbase":
      return coinbase(urls.coinbase ?? defaultSourceUrls.coinbase);
    case "bitstamp":
      return bitstamp(urls.bitstamp ?? defaultSourceUrls.bitstamp);
    case "fixed":
      return fixed();
  }
}
