// A machine with no route to the exchanges (issue 65): a fiat-priced create used to answer "retry
// later" with a Retry-After, on a machine where waiting never helps, and nothing else said why. Now
// the start banner names the rate sources, the log names each source that cannot be reached and
// why, once until that changes, /readyz warns, and the create's error says no exchange can be
// reached and names RATE_SOURCES=fixed (Test). The exchanges here are local
// ports nothing listens on; an exchange that answers 503 is reachable, and its create still says
// to retry later (fiat-pricing.test.ts).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import t from "tap";
import { openDatabase } from "../../services/app/database.ts";
import { createApiKey, createMerchant } from "../../services/auth/admin.ts";
import { scopes } from "../../services/auth/keys.ts";
import { call, createTestDatabase, idemKey, natsUrl, uniqueName, until } from "../helpers/harness.ts";
import { freePort, spawnService } from "../helpers/processes.ts";

const dataDir = mkdtempSync(path.join(tmpdir(), "test-rates-offline-"));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
const databaseUrl = await createTestDatabase(t);
// Ports taken and given back: nothing listens on them, so each read is refused at once.
const closed = async () => `http://127.0.0.1:${await freePort()}`;
const p = spawnService(t, ["rpc", "gateway"], {
  RATE_SOURCES: "kraken,coinbase,bitstamp",
  RATE_SOURCE_KRAKEN_URL: await closed(),
  RATE_SOURCE_COINBASE_URL: await closed(),
  RATE_SOURCE_BITSTAMP_URL: await closed(),
  RATE_REFRESH_SECONDS: "1",
  DATABASE_URL: databaseUrl,
  NATS_URL: natsUrl,
  JETSTREAM_PREFIX: uniqueName("t"),
  DATA_DIR: dataDir,
  PORT: "0",
  RPC_PORT: "0",
  OPS_PORT: "0",
  LOG_LEVEL: "info",
});
await p.started;
const out = () => p.output();
const base = /REST API {5}(http:\/\/[^/]+)/.exec(out())?.[1];
const ops = /health {7}(http:\/\/[^/]+)\/healthz/.exec(out())?.[1];

const db = await openDatabase(databaseUrl);
t.teardown(() => db.close());
const merchant = (await createMerchant(db.em.fork(), "Offline Shop")).id;
const key = (await createApiKey(db.em.fork(), merchant, "test", [...scopes])).api_key;

/** The number on a metric's line, 0 when absent. */
const metric = async (line: string) => Number(new RegExp(`^${line.replace(/[{}"]/g, "\\$&")} (\\d+)`, "m").exec(await (await fetch(`${ops}/metrics`)).text())?.[1] ?? 0);
const logLines = () =>
  out()
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as { level: number; msg: string; source?: string; err?: string });

t.test("the start banner names the rate sources", async (t) => {
  t.ok(base && ops, "the banner gives the API and ops addresses");
  t.match(out(), /^ {2}rates {8}kraken, coinbase, bitstamp \(RATE_SOURCES\), 2 must agree \(RATE_MIN_SOURCES\)$/m);
});

t.test("each source that cannot be reached is logged once, with why, however many rounds fail", async (t) => {
  // Three rounds of refused reads for every source (one a second): the sentinel for "once".
  await until("three failed rounds of each source", async () => {
    for (const source of ["kraken", "coinbase", "bitstamp"]) if ((await metric(`rate_source_errors_total{source="${source}",pair="BTC-USD"}`)) < 3) return undefined;
    return true;
  }, 30_000);
  const said = logLines().filter((l) => l.msg.startsWith("rate source cannot be reached"));
  t.same(said.map((l) => l.source).sort(), ["bitstamp", "coinbase", "kraken"], "one line per source");
  for (const l of said) {
    t.equal(l.level, 40, `${l.source}: at warn`);
    t.match(l.err, /fetch failed \(ECONNREFUSED\)/, `${l.source}: why`);
    t.match(l.msg, /RATE_SOURCES=fixed/, "and what to do offline");
  }
});

t.test("a fiat-priced create says no exchange can be reached and names RATE_SOURCES=fixed", async (t) => {
  const before = await db.em.fork().execute<{ n: number }[]>(`select count(*)::int as n from payment_intents`);
  const res = await call(base!, "POST", `/api/v1/merchants/${merchant}/payment-intents`, {
    key,
    idempotencyKey: idemKey(),
    body: { network: "bitcoin", asset: "BTC", price_amount: "25.00", price_currency: "USD" },
  });
  t.equal(res.status, 503);
  t.equal(res.body.error.code, "rate_unavailable");
  t.match(res.body.error.message, /no exchange rate source can be reached from the server \(kraken \(fetch failed \(ECONNREFUSED\)\), coinbase .*, bitstamp .*\)/);
  t.match(res.body.error.message, /start the server with RATE_SOURCES=fixed \(Test only\)/);
  t.notMatch(res.body.error.message, /retry later/i, "not told to wait");
  t.match(res.headers.get("retry-after"), /^[1-9][0-9]*$/, "Retry-After as on every 503: the next refresh");
  t.same(await db.em.fork().execute<{ n: number }[]>(`select count(*)::int as n from payment_intents`), before, "nothing created");
});

t.test("/readyz warns while fewer sources answer than must agree", async (t) => {
  const ready = (await (await fetch(`${ops}/readyz`)).json()) as { status: string; warnings: string[] };
  t.equal(ready.status, "ready", "a warning, not a refusal: only fiat-priced creates need rates");
  const warning = ready.warnings.find((w) => w.startsWith("exchange rates:"));
  t.match(warning, /^exchange rates: 0 of RATE_SOURCES answer, 2 must agree \(RATE_MIN_SOURCES\); not answering: kraken \(fetch failed \(ECONNREFUSED\)\), coinbase/);
  t.match(warning, /none can be reached \(for development without internet: RATE_SOURCES=fixed, Test only\)/);
});
