import { readCappedText } from "../platform/capped-body.ts";

/**
 * Where rates come from: each exchange's documented public, keyless ticker endpoint, read over
 * https (http only to this machine: config.ts refuses the rest), each answer up to maxAnswerBytes.
 * A source answers one pair at a time with the price of one `base` in `quote`, as the decimal
 * string the exchange wrote; anything else it answers is an error (counted, not used), and an
 * answer for another pair than the one asked is refused (RefusedAnswer).
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

/** An exchange's answer is small (a ticker is under 1 KiB); a longer one is not a ticker, and is not read past this. */
export const maxAnswerBytes = 64 * 1024;

/**
 * An answer that is not the ticker asked for: one for another pair, or one longer than
 * maxAnswerBytes. That read fails (the source has no answer for the pair this round); the engine
 * logs it as refused, apart from a source that is down.
 */
export class RefusedAnswer extends Error {
  constructor(message: string) {
    super(message);
    this.name = "RefusedAnswer";
  }
}

async function getJson(source: string, url: string, signal: AbortSignal): Promise<unknown> {
  const res = await fetch(url, { signal, headers: { accept: "application/json" }, redirect: "error" });
  if (!res.ok) {
    await res.body?.cancel().catch(() => {});
    throw new Error(`HTTP ${res.status}`);
  }
  // Read as a stream and given up at the cap: an exchange (or whoever answers for it) streaming
  // without end costs this process at most the cap, never its memory.
  const text = await readCappedText(res, maxAnswerBytes, () => new RefusedAnswer(`${source}: the answer is over ${maxAnswerBytes} bytes, not a ticker; it was not read further`));
  return JSON.parse(text) as unknown;
}

const field = (v: unknown, key: string): unknown => (v !== null && typeof v === "object" ? (v as Record<string, unknown>)[key] : undefined);

function decimal(v: unknown, what: string): string {
  if (typeof v !== "string" || !/^[0-9]+(\.[0-9]+)?$/.test(v)) throw new Error(`no price in ${what}`);
  return v;
}

/** A name an answer gave, as it may be shown in a log line: printable, and short. */
const shown = (v: unknown) => JSON.stringify(String(v).replace(/[^\x20-\x7e]/g, "?").slice(0, 40));

/**
 * Kraken's names of an asset: its code (XBT for bitcoin), and for a three-letter code the same
 * behind X (a cryptocurrency, as XXBT, XETH) or Z (a fiat currency, as ZUSD, ZEUR): Kraken names
 * its older assets that way and its newer ones (SOL, USDC, USDT) by their code alone.
 */
const krakenAssetNames = (code: string): string[] => (code.length === 3 ? [code, `X${code}`, `Z${code}`] : [code]);

/** The names Kraken may give `pair` in a ticker's result: XXBTZUSD for XBTUSD, SOLUSD, ZEURZUSD, USDTZUSD… */
export function krakenPairNames(pair: Pair): Set<string> {
  const symbol = (s: string) => (s === "BTC" ? "XBT" : s);
  const names = new Set<string>();
  for (const base of krakenAssetNames(symbol(pair.base))) for (const quote of krakenAssetNames(symbol(pair.quote))) names.add(`${base}${quote}`);
  return names;
}

/**
 * Kraken, GET /0/public/Ticker?pair=XBTUSD (docs.kraken.com, "Get Ticker Information"):
 * {"error":[],"result":{"XXBTZUSD":{"a":[…],"b":[…],"c":["<last trade price>","<lot volume>"],…}}}.
 * Kraken calls bitcoin XBT and names the result by its own pair name (krakenPairNames): the one
 * result must be named for the pair asked for, or the answer is refused.
 */
export function kraken(baseUrl: string): RateSource {
  const symbol = (s: string) => (s === "BTC" ? "XBT" : s);
  return {
    name: "kraken",
    testOnly: false,
    async read(pair, signal) {
      const body = await getJson("kraken", `${baseUrl}/0/public/Ticker?pair=${symbol(pair.base)}${symbol(pair.quote)}`, signal);
      const errors = field(body, "error");
      if (Array.isArray(errors) && errors.length > 0) throw new Error(`kraken: ${String(errors[0]).slice(0, 100)}`);
      const result = field(body, "result");
      const tickers = result !== null && typeof result === "object" && !Array.isArray(result) ? Object.entries(result) : [];
      if (tickers.length !== 1) throw new Error("kraken: not one ticker in result");
      const [name, ticker] = tickers[0]!;
      if (!krakenPairNames(pair).has(name)) throw new RefusedAnswer(`kraken: answered for the pair ${shown(name)}, not ${pairName(pair)}`);
      const last = field(ticker, "c");
      return decimal(Array.isArray(last) ? last[0] : undefined, "kraken's result.c");
    },
  };
}

/**
 * Coinbase, GET /v2/prices/BTC-USD/spot (docs.cdp.coinbase.com, "Get Spot Price"):
 * {"data":{"amount":"50000.00","base":"BTC","currency":"USD"}}. The base and currency must be the
 * pair asked for, or the answer is refused.
 */
export function coinbase(baseUrl: string): RateSource {
  return {
    name: "coinbase",
    testOnly: false,
    async read(pair, signal) {
      const data = field(await getJson("coinbase", `${baseUrl}/v2/prices/${pair.base}-${pair.quote}/spot`, signal), "data");
      if (field(data, "base") !== pair.base || field(data, "currency") !== pair.quote) {
        throw new RefusedAnswer(`coinbase: answered for another pair (${shown(field(data, "base"))}-${shown(field(data, "currency"))}), not ${pairName(pair)}`);
      }
      return decimal(field(data, "amount"), "coinbase's data.amount");
    },
  };
}

/**
 * Bitstamp, GET /api/v2/ticker/btcusd/ (bitstamp.net/api, "Ticker"):
 * {"timestamp":"…","open":"…","high":"…","low":"…","last":"50000.00","volume":"…","vwap":"…","bid":"…","ask":"…",…}.
 * The one-market ticker names its market only in the path asked; its all-markets form (and any
 * answer that says) names it in `pair`, "BTC/USD": an answer whose `pair` is another market, or
 * that is a list of tickers rather than one, is refused.
 */
export function bitstamp(baseUrl: string): RateSource {
  return {
    name: "bitstamp",
    testOnly: false,
    async read(pair, signal) {
      const body = await getJson("bitstamp", `${baseUrl}/api/v2/ticker/${pair.base.toLowerCase()}${pair.quote.toLowerCase()}/`, signal);
      if (body === null || typeof body !== "object" || Array.isArray(body)) throw new RefusedAnswer(`bitstamp: the answer is not one ticker`);
      const named = field(body, "pair");
      if (named !== undefined && (typeof named !== "string" || named.toUpperCase() !== `${pair.base}/${pair.quote}`)) {
        throw new RefusedAnswer(`bitstamp: answered for the pair ${shown(named)}, not ${pairName(pair)}`);
      }
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
