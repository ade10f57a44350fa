// Rate settings that would let a Live intent be priced on an unchecked word (issue 61): a plain
// http exchange URL stops the start, and so does RATE_MIN_SOURCES below 2 once the installation
// has Live keys; a Live key made after the start still gets no quote from one source.
// The exchanges are local servers answering their documented shapes (test/helpers/exchanges.ts).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import t from "tap";
import { ConfigError } from "../../services/platform/config.ts";
import { fakeExchanges } from "../helpers/exchanges.ts";
import { call, createTestDatabase, idemKey, merchantWithKey, natsUrl, startTestApp, uniqueName, until } from "../helpers/harness.ts";
import { spawnService } from "../helpers/processes.ts";

const ex = await fakeExchanges({
  kraken: { "BTC-USD": "50000.0", "ETH-USD": "2500.0" },
  coinbase: { "BTC-USD": "50010.00", "ETH-USD": "2501.00" },
  bitstamp: { "BTC-USD": "49990.00", "ETH-USD": "2499.00" },
});
t.teardown(ex.close);

/** A process's stdout and stderr as lines, without empty ones. */
const linesOf = (output: string) => output.split("\n").filter((l) => l.trim() !== "");

t.test("an exchange URL over plain http to another host: the start stops with one line naming the setting, and no secret", async (t) => {
  const dataDir = mkdtempSync(path.join(tmpdir(), "test-rates-"));
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  // A database and NATS of its own: a start that took the URL would come up (and be told apart) at once.
  const p = spawnService(t, ["rpc"], {
    RATE_SOURCES: "kraken,coinbase,bitstamp",
    RATE_SOURCE_KRAKEN_URL: "http://192.0.2.10:8080/kraken?token=s3cret",
    DATABASE_URL: await createTestDatabase(t),
    NATS_URL: natsUrl,
    JETSTREAM_PREFIX: uniqueName("t"),
    DATA_DIR: dataDir,
    PORT: "0",
    RPC_PORT: "0",
    OPS_PORT: "0",
    LOG_LEVEL: "warn",
  });
  t.equal(await Promise.race([p.exited, p.started.then(() => "started")]), 1, "exits 1, never started");
  t.same(linesOf(p.output()), [
    "payments: RATE_SOURCE_KRAKEN_URL must be https to a host other than this machine (192.0.2.10 over http): anyone on the path could answer for an exchange whose rates price Live intents",
  ], "one line saying why, and nothing else");
  t.notMatch(p.output(), /s3cret/, "the URL's token is not repeated");
});

t.test("RATE_MIN_SOURCES=1: taken while the installation is Test only, Live quotes still need two; refused at start once it has Live keys", async (t) => {
  const oneSource = { RATE_SOURCES: "kraken", RATE_SOURCE_KRAKEN_URL: ex.kraken.url, RATE_MIN_SOURCES: "1", RATE_REFRESH_SECONDS: "1" };
  const first = await startTestApp(t, oneSource);
  const test = await merchantWithKey(first.app);
  const priced = { network: "ethereum", asset: "ETH", price_amount: "25.00", price_currency: "USD" };
  const create = (key: string, merchant: string) => call(first.base, "POST", `/api/v1/merchants/${merchant}/payment-intents`, { key, idempotencyKey: idemKey(), body: priced });
  const quoted = await until("a Test quote from kraken alone", async () => {
    const res = await create(test.key, test.merchant);
    return res.status === 200 && res;
  }, 10_000);
  t.same(quoted.body.data.quote.sources, ["kraken"], "Test: one source, as the setting says");
  t.equal(quoted.body.data.requested_amount, "0.01");

  // A Live key made while it runs: the start could not refuse it, the engine does not quote Live on one source.
  const live = await merchantWithKey(first.app, "live");
  const refused = await create(live.key, live.merchant);
  t.equal(refused.status, 503, JSON.stringify(refused.body));
  t.equal(refused.body.error.code, "rate_unavailable", "Live: not priced on one exchange's word");
  await first.app.stop();

  // The same installation, now with a Live key, started again as it was.
  const again = await startTestApp(t, { ...oneSource, DATABASE_URL: first.databaseUrl }, undefined, first.masterKey).then(
    () => undefined,
    (err: unknown) => err,
  );
  t.type(again, ConfigError, "refused at start");
  t.equal(
    (again as Error).message,
    "RATE_MIN_SOURCES is 1 (the default with one source) and this installation has Live keys: a Live quote needs at least 2 sources to agree; set RATE_SOURCES to 2 or more exchanges (kraken,coinbase,bitstamp) and RATE_MIN_SOURCES to 2 or more",
  );
  const twoOfOne = await startTestApp(t, { ...oneSource, RATE_SOURCES: "kraken,coinbase", RATE_SOURCE_COINBASE_URL: ex.coinbase.url, DATABASE_URL: first.databaseUrl }, undefined, first.masterKey).then(
    () => undefined,
    (err: unknown) => err,
  );
  t.match(twoOfOne, { message: /^RATE_MIN_SOURCES is 1 and this installation has Live keys/ }, "two sources, one to agree: refused too");

  // As `npm start` runs it: one line on stderr, exit 1.
  const dataDir = mkdtempSync(path.join(tmpdir(), "test-rates-"));
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  const p = spawnService(t, ["rpc"], {
    ...oneSource,
    DATABASE_URL: first.databaseUrl,
    NATS_URL: natsUrl,
    JETSTREAM_PREFIX: uniqueName("t"),
    SECRET_ENCRYPTION_KEY: first.masterKey.toString("hex"),
    SECRET_ENCRYPTION_KEY_PREVIOUS: undefined,
    DATA_DIR: dataDir,
    PORT: "0",
    RPC_PORT: "0",
    OPS_PORT: "0",
    LOG_LEVEL: "warn",
  });
  t.equal(await Promise.race([p.exited, p.started.then(() => "started")]), 1, "exits 1, never started");
  t.same(linesOf(p.stderr()), [`payments: ${(again as Error).message}`], "one line saying why");
  t.notMatch(p.stdout(), /Payment Intent service:/, "it never started");

  // Two sources, both to agree: it starts, and quotes Live.
  const fixed = await startTestApp(t, {
    ...oneSource,
    RATE_SOURCES: "kraken,coinbase",
    RATE_SOURCE_COINBASE_URL: ex.coinbase.url,
    RATE_MIN_SOURCES: "2",
    DATABASE_URL: first.databaseUrl,
  }, undefined, first.masterKey);
  const livePriced = await until("a Live quote from two sources", async () => {
    const res = await call(fixed.base, "POST", `/api/v1/merchants/${live.merchant}/payment-intents`, { key: live.key, idempotencyKey: idemKey(), body: priced });
    return res.status === 200 && res;
  }, 10_000);
  t.same(livePriced.body.data.quote.sources, ["coinbase", "kraken"]);
});
