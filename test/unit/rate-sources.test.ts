// Each exchange source against a local server answering its documented public shape
// (test/helpers/exchanges.ts cites them), and what it refuses to take as a price.
import http from "node:http";
import type { AddressInfo } from "node:net";
import t from "tap";
import { bitstamp, coinbase, fixed, kraken } from "../../services/rates/sources.ts";
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
    ["kraken with two tickers", () => kraken(url).read(btcUsd, signal()), JSON.stringify({ error: [], result: { A: { c: ["1", "1"] }, B: { c: ["2", "1"] } } }), /not one ticker/],
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
