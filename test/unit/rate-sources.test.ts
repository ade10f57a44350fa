// Each exchange source against a local server answering its documented public shape
// (test/helpers/exchanges.ts cites them), and what it refuses to take as a price.
import http from "node:http";
import type { AddressInfo } from "node:net";
import t, { type Test as TapTest } from "tap";
import { bitstamp, coinbase, fixed, kraken, krakenPairNames, maxAnswerBytes, RefusedAnswer } from "../../services/rates/sources.ts";
import { fakeExchanges } from "../helpers/exchanges.ts";

const btcUsd = { base: "BTC", quote: "USD" };
const signal = () => AbortSignal.timeout(5000);

t.test("the documented shapes give the last price", async (t) => {
  const ex = await fakeExchanges({ kraken: { "BTC-USD": "50000.0" }, coinbase: { "BTC-USD": "50010.00" }, bitstamp: { "BTC-USD": "49990.00" } });
  t.teardown(ex.close);
  t.equal(await kraken(ex.kraken.url).read(btcUsd, signal()), "50000.0");
  t.equal(await coinbase(ex.coinbase.url).read(btcUsd, signal()), "50010.00");
  t.equal(await bitstamp(ex.bitstamp.url).read(btcUsd, signal()), "49990.00");
  await t.rejects(kraken(ex.kraken.url).read({ base: "ETH", quote: "USD" }, signal()), /EQuery:Unknown asset pair/, "kraken's error array");
  await t.rejects(coinbase(ex.coinbase.url).read({ base: "ETH", quote: "USD" }, signal()), /HTTP 404/);
  ex.bitstamp.down = true;
  await t.rejects(bitstamp(ex.bitstamp.url).read(btcUsd, signal()), /HTTP 503/);
});

t.test("answers that are not a price are errors, never a rate", async (t) => {
  let body = "";
  const server = http.createServer((_req, res) => res.writeHead(200, { "content-type": "application/json" }).end(body));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const cases: [string, () => Promise<string>, string, RegExp][] = [
    ["coinbase answering another pair", () => coinbase(url).read(btcUsd, signal()), JSON.stringify({ data: { amount: "1", base: "ETH", currency: "USD" } }), /another pair/],
    ["coinbase with a float", () => coinbase(url).read(btcUsd, signal()), JSON.stringify({ data: { amount: 50000, base: "BTC", currency: "USD" } }), /no price/],
    ["bitstamp with a negative price", () => bitstamp(url).read(btcUsd, signal()), JSON.stringify({ last: "-1" }), /no price/],
    ["kraken with two tickers", () => kraken(url).read(btcUsd, signal()), JSON.stringify({ error: [], result: { XXBTZUSD: { c: ["1", "1"] }, XETHZUSD: { c: ["2", "1"] } } }), /not one ticker/],
    ["not JSON", () => bitstamp(url).read(btcUsd, signal()), "<html>", /JSON|Unexpected token/],
  ];
  for (const [name, read, answer, error] of cases) {
    body = answer;
    await t.rejects(read(), error, name);
  }
});

t.test("the development source: fixed rates, Test only", async (t) => {
  const source = fixed();
  t.equal(source.testOnly, true);
  t.equal(await source.read(btcUsd, signal()), "50000");
  await t.rejects(source.read({ base: "BTC", quote: "JPY" }, signal()), /no rate for BTC-JPY/);
});

/** A local server answering every request with `body` (a string, or a function of the request's URL). */
async function answering(t: TapTest, body: (url: URL) => string): Promise<string> {
  const server = http.createServer((req, res) => res.writeHead(200, { "content-type": "application/json" }).end(body(new URL(req.url ?? "/", "http://x"))));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const krakenTicker = (name: string, price: string) => JSON.stringify({ error: [], result: { [name]: { a: [price, "1", "1.000"], b: [price, "1", "1.000"], c: [price, "0.1"] } } });

t.test("kraken: an answer for another pair is refused; Kraken's own names for the pair asked are taken", async (t) => {
  let name = "XETHZUSD";
  const url = await answering(t, () => krakenTicker(name, "2500.0"));
  const err = await kraken(url).read(btcUsd, signal()).catch((e: unknown) => e);
  t.type(err, RefusedAnswer, "refused, not a price");
  t.equal((err as Error).message, `kraken: answered for the pair "XETHZUSD", not BTC-USD`);
  for (const [asked, answered] of [
    [btcUsd, "XXBTZUSD"],
    [btcUsd, "XBTUSD"],
    [{ base: "BTC", quote: "EUR" }, "XXBTZEUR"],
    [{ base: "ETH", quote: "EUR" }, "XETHZEUR"],
    [{ base: "SOL", quote: "USD" }, "SOLUSD"],
    [{ base: "EUR", quote: "USD" }, "ZEURZUSD"],
    [{ base: "USDT", quote: "USD" }, "USDTZUSD"],
    [{ base: "USDC", quote: "EUR" }, "USDCEUR"],
  ] as const) {
    name = answered;
    t.equal(await kraken(url).read(asked, signal()), "2500.0", `${answered} for ${asked.base}-${asked.quote}`);
  }
  for (const [asked, answered] of [
    [btcUsd, "XXBTZEUR"],
    [btcUsd, "XBTUSDT"],
    [{ base: "EUR", quote: "USD" }, "ZUSDZEUR"],
    [{ base: "USDT", quote: "USD" }, "USDCUSD"],
    [{ base: "SOL", quote: "EUR" }, "SOLUSD"],
  ] as const) {
    name = answered;
    await t.rejects(kraken(url).read(asked, signal()), RefusedAnswer, `${answered} is not ${asked.base}-${asked.quote}`);
  }
  t.notOk(krakenPairNames(btcUsd).has("XETHZUSD"));
});

t.test("bitstamp: a ticker naming another pair, or a list of tickers, is refused", async (t) => {
  let body = "";
  const url = await answering(t, () => body);
  body = JSON.stringify({ last: "2500.00", pair: "ETH/USD" });
  const err = await bitstamp(url).read(btcUsd, signal()).catch((e: unknown) => e);
  t.type(err, RefusedAnswer);
  t.equal((err as Error).message, `bitstamp: answered for the pair "ETH/USD", not BTC-USD`);
  body = JSON.stringify([{ last: "50000.00", pair: "BTC/USD" }]);
  await t.rejects(bitstamp(url).read(btcUsd, signal()), /bitstamp: the answer is not one ticker/);
  body = JSON.stringify({ last: "50000.00", pair: "BTC/USD" });
  t.equal(await bitstamp(url).read(btcUsd, signal()), "50000.00", "its own pair named: taken");
  body = JSON.stringify({ last: "50000.00", timestamp: "1700000000", market_type: "SPOT" });
  t.equal(await bitstamp(url).read(btcUsd, signal()), "50000.00", "the one-market ticker as documented, naming no pair: taken");
});

t.test("an answer streaming 200 MiB is cut at the cap: the read fails, the connection is closed, memory stays flat", async (t) => {
  const total = 200 * 1024 * 1024;
  const chunk = Buffer.alloc(64 * 1024, 0x20);
  let sent = 0;
  let closedAt: ((n: number) => void) | undefined;
  const closed = new Promise<number>((resolve) => (closedAt = resolve));
  // Chunked (no Content-Length), written as fast as the reader takes it: only reading it shows its size.
  const server = http.createServer((_req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.on("close", () => closedAt?.(sent));
    res.write(`{"error":[],"result":{"XXBTZUSD":{"c":["`);
    const pump = () => {
      while (sent < total) {
        sent += chunk.length;
        if (!res.write(chunk)) return void res.once("drain", pump);
      }
      res.end(`"]}}}`);
    };
    pump();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  // closeAllConnections: fetch may have opened a spare connection that sends nothing, which close() would wait out.
  t.teardown(() => new Promise<void>((resolve) => (server.close(() => resolve()), server.closeAllConnections())));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const rss = () => process.memoryUsage.rss();
  const before = rss();
  let peak = before;
  const sampler = setInterval(() => (peak = Math.max(peak, rss())), 2);
  const err = await kraken(url).read(btcUsd, AbortSignal.timeout(60_000)).catch((e: unknown) => e).finally(() => clearInterval(sampler));
  peak = Math.max(peak, rss());
  t.type(err, RefusedAnswer, "the read fails");
  t.equal((err as Error).message, `kraken: the answer is over ${maxAnswerBytes} bytes, not a ticker; it was not read further`);
  const sentWhenClosed = await closed;
  t.ok(sentWhenClosed < 32 * 1024 * 1024, `the connection was closed after ${(sentWhenClosed / 1048576).toFixed(1)} MiB of 200 MiB sent`);
  t.ok(peak - before < 32 * 1024 * 1024, `the process grew by ${((peak - before) / 1048576).toFixed(1)} MiB at most while reading (far less than 200 MiB)`);
});

t.test("a Content-Length over the cap is refused before the body is read", async (t) => {
  let closedAt: (() => void) | undefined;
  const closed = new Promise<void>((resolve) => (closedAt = resolve));
  const server = http.createServer((_req, res) => {
    res.writeHead(200, { "content-type": "application/json", "content-length": String(maxAnswerBytes + 1) });
    res.on("close", () => closedAt?.());
    // Only the first bytes: the rest never comes, so a reader waiting for them would time out.
    res.write("{");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  // closeAllConnections: fetch may have opened a spare connection that sends nothing, which close() would wait out.
  t.teardown(() => new Promise<void>((resolve) => (server.close(() => resolve()), server.closeAllConnections())));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  await t.rejects(coinbase(url).read(btcUsd, AbortSignal.timeout(10_000)), { name: "RefusedAnswer", message: /coinbase: the answer is over 65536 bytes/ });
  await closed;
  t.pass("the connection was closed");
});
