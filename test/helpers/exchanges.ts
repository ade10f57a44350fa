import http from "node:http";
import type { AddressInfo } from "node:net";

/**
 * Local stand-ins for the exchanges' public ticker endpoints, answering exactly the documented
 * response shapes (services/rates/sources.ts cites each):
 * - Kraken, GET /0/public/Ticker?pair=XBTUSD (docs.kraken.com, "Get Ticker Information"):
 *   {"error":[],"result":{"XXBTZUSD":{"a":[…],"b":[…],"c":["<price>","<lot volume>"],…}}}
 * - Coinbase, GET /v2/prices/BTC-USD/spot (docs.cdp.coinbase.com, "Get Spot Price"):
 *   {"data":{"amount":"50000.00","base":"BTC","currency":"USD"}}
 * - Bitstamp, GET /api/v2/ticker/btcusd/ (bitstamp.net/api, "Ticker"): {"last":"50000.00",…}
 * Each holds a price per pair ("BTC-USD"); `down` makes it answer 503, as an exchange in an outage.
 */
export interface FakeExchange {
  name: "kraken" | "coinbase" | "bitstamp";
  url: string;
  prices: Map<string, string>;
  down: boolean;
  /** Requests answered so far (the bench checks a create makes none). */
  requests: number;
  close(): Promise<void>;
}

const krakenSymbol = (s: string) => (s === "BTC" ? "XBT" : s);

function answer(name: FakeExchange["name"], url: URL, prices: Map<string, string>): unknown {
  if (name === "kraken") {
    const pair = url.searchParams.get("pair") ?? "";
    const found = [...prices].find(([p]) => p.split("-").map(krakenSymbol).join("") === pair);
    if (!found) return { error: ["EQuery:Unknown asset pair"] };
    const [base, quote] = found[0].split("-") as [string, string];
    // Kraken's own pair name, e.g. XXBTZUSD: X before a crypto, Z before a fiat currency.
    const key = `X${krakenSymbol(base)}Z${quote}`;
    const p = found[1];
    return { error: [], result: { [key]: { a: [p, "1", "1.000"], b: [p, "1", "1.000"], c: [p, "0.1"], v: ["10", "20"], p: [p, p], t: [5, 10], l: [p, p], h: [p, p], o: p } } };
  }
  if (name === "coinbase") {
    const m = /^\/v2\/prices\/([A-Z]+)-([A-Z]+)\/spot$/.exec(url.pathname);
    const p = m && prices.get(`${m[1]}-${m[2]}`);
    return m && p ? { data: { amount: p, base: m[1], currency: m[2] } } : undefined;
  }
  const m = /^\/api\/v2\/ticker\/([a-z]+)\/$/.exec(url.pathname);
  const found = m && [...prices].find(([pair]) => pair.replace("-", "").toLowerCase() === m[1]);
  if (!found) return undefined;
  const p = found[1];
  return { timestamp: String(Math.floor(Date.now() / 1000)), open: p, high: p, low: p, last: p, volume: "10.0", vwap: p, bid: p, ask: p, side: "0", open_24: p, percent_change_24: "0.00" };
}

export async function fakeExchange(name: FakeExchange["name"], prices: Record<string, string>): Promise<FakeExchange> {
  const ex: FakeExchange = { name, url: "", prices: new Map(Object.entries(prices)), down: false, requests: 0, close: async () => undefined };
  const server = http.createServer((req, res) => {
    ex.requests++;
    if (ex.down) {
      res.writeHead(503, { "content-type": "text/plain" }).end("Service Unavailable");
      return;
    }
    const body = answer(name, new URL(req.url ?? "/", "http://x"), ex.prices);
    if (body === undefined) res.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ errors: [{ id: "not_found", message: "Invalid currency" }] }));
    else res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(body));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  ex.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  ex.close = () => new Promise<void>((resolve) => server.close(() => resolve()));
  return ex;
}

/** The three, with the settings that point the service at them. */
export async function fakeExchanges(prices: Record<"kraken" | "coinbase" | "bitstamp", Record<string, string>>) {
  const kraken = await fakeExchange("kraken", prices.kraken);
  const coinbase = await fakeExchange("coinbase", prices.coinbase);
  const bitstamp = await fakeExchange("bitstamp", prices.bitstamp);
  return {
    kraken,
    coinbase,
    bitstamp,
    all: [kraken, coinbase, bitstamp],
    env: {
      RATE_SOURCES: "kraken,coinbase,bitstamp",
      RATE_SOURCE_KRAKEN_URL: kraken.url,
      RATE_SOURCE_COINBASE_URL: coinbase.url,
      RATE_SOURCE_BITSTAMP_URL: bitstamp.url,
    },
    close: async () => {
      await Promise.all([kraken.close(), coinbase.close(), bitstamp.close()]);
    },
  };
}
