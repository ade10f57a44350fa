// Every counted payment of a fiat-priced intent gets its fiat value (issue 61): one seen while no
// exchange rate was fresh (all three sources down, faked by local servers answering their
// documented shapes: test/helpers/exchanges.ts) is valued by the valuation sweep once the sources
// answer again, and its timeline says so (payment.valued); two sweeps at once value it once.
import t, { type Test } from "tap";
import { intentOutputs } from "../../services/chains/outputs.ts";
import { Intents } from "../../services/intents/intents.ts";
import { valueDue } from "../../services/intents/valuation.ts";
import { IntentViews } from "../../services/intents/views.ts";
import { RateEngine } from "../../services/rates/engine.ts";
import { fakeExchanges } from "../helpers/exchanges.ts";
import { dashboardClient } from "../helpers/dashboard.ts";
import { call, idemKey, merchantWithKey, startTestApp, until } from "../helpers/harness.ts";

const ex = await fakeExchanges({ kraken: { "BTC-USD": "50000.0" }, coinbase: { "BTC-USD": "50000.00" }, bitstamp: { "BTC-USD": "50000.00" } });
t.teardown(ex.close);
// Refreshed every second and stale after two: an outage and its end show within seconds, and so
// does the sweep, which runs once a refresh.
const { app, base } = await startTestApp(t, {
  ...ex.env,
  RATE_REFRESH_SECONDS: "1",
  RATE_MAX_AGE_SECONDS: "2",
  RATE_MAX_SPREAD_BPS: "100",
  DASHBOARD_BASE_URL: "http://127.0.0.1/dashboard",
});
const m = await merchantWithKey(app);
const path = `/api/v1/merchants/${m.merchant}/payment-intents`;
const btcPrice = { network: "bitcoin", asset: "BTC", price_amount: "100.00", price_currency: "USD" };
const create = (body: Record<string, unknown>) => call(base, "POST", path, { key: m.key, idempotencyKey: idemKey(), body });
const read = async (id: string) => (await call(base, "GET", `${path}/${id}`, { key: m.key })).body.data;
const simulateLate = (id: string) => call(base, "POST", `/api/v1/sandbox/merchants/${m.merchant}/payment-intents/${id}/simulate`, { key: m.key, body: { outcome: "late", amount: "0.002" } });

interface StoredEvent {
  id: string;
  type: string;
  data: { payment_intent: { transactions: { fiat_value?: string | null }[] }; valuation?: Record<string, unknown> & { transactions: Record<string, unknown>[] } };
}
async function eventsOf(id: string, type = "payment.valued"): Promise<StoredEvent[]> {
  const rows = await app.db.em.fork().execute<{ payload: string }[]>(`select payload from webhook_events where payment_intent_id = ? and type = ? order by created_at, id`, [id, type]);
  return rows.map((r) => JSON.parse(r.payload) as StoredEvent);
}
const dueSince = async (id: string) => (await app.db.em.fork().execute<{ due: Date | null }[]>(`select fiat_value_due_since as due from payment_intents where id = ?`, [id]))[0]?.due ?? null;

/** Every source down, until the engine has no fresh rate (a fiat-priced create is refused). */
async function outage() {
  for (const e of ex.all) e.down = true;
  await until("rate_unavailable", async () => (await create(btcPrice)).status === 503, 10_000);
}

/** A fiat-priced BTC intent for 100.00 USD, quoted at `rate`. */
async function quotedIntent(rate: string) {
  const res = await until("a quote", async () => {
    const r = await create(btcPrice);
    return r.status === 200 && r.body.data.quote.rate === rate && r;
  }, 10_000);
  return res.body.data as { public_id: string; requested_amount: string };
}

/** Pays the intent in full after its window, during the outage: late, counted, and no rate to value it at. */
async function paidLateWithoutRate(t: Test, id: string) {
  const sim = await simulateLate(id);
  t.equal(sim.status, 200, JSON.stringify(sim.body));
  t.equal(sim.body.data.status, "late");
  const tx = sim.body.data.transactions[0];
  t.equal(tx.counted, true, "the payment counts");
  t.equal(tx.fiat_value ?? null, null, "no fiat value: no rate was fresh when it was seen");
  return tx as { tx_hash: string; output_index: number };
}

t.test("a payment counted during a rate outage is valued once the sources answer again, and its timeline says so", async (t) => {
  const pi = await quotedIntent("50000");
  t.equal(pi.requested_amount, "0.002");
  await outage();
  const tx = await paidLateWithoutRate(t, pi.public_id);
  t.ok(await dueSince(pi.public_id), "the intent waits for the sweep");
  t.equal((await read(pi.public_id)).transactions[0].fiat_value ?? null, null, "still none while the sources are down");

  // The market is at 40,000 when the sources come back.
  for (const e of ex.all) {
    e.prices.set("BTC-USD", "40000.00");
    e.down = false;
  }
  const valued = await until("the payment valued", async () => {
    const got = await read(pi.public_id);
    return got.transactions[0].fiat_value !== undefined && got.transactions[0].fiat_value !== null && got;
  }, 15_000);
  t.equal(valued.transactions[0].fiat_value, "80", "0.002 BTC at 40,000 USD: the first fresh rate after it was seen");
  t.equal(valued.status, "late", "its status does not change");
  t.equal(valued.quote.rate, "50000", "the intent's quote is unchanged");
  t.equal(await dueSince(pi.public_id), null, "nothing waits any more");

  // The timeline: one payment.valued, saying what, at what rate, from which sources, and when it was seen.
  const events = await eventsOf(pi.public_id);
  t.equal(events.length, 1, "told once");
  const event = events[0]!;
  t.equal(event.data.payment_intent.transactions[0]?.fiat_value, "80", "the event's intent shows the value");
  t.equal(event.data.valuation?.currency, "USD");
  t.match(event.data.valuation?.transactions, [
    { tx_hash: tx.tx_hash, output_index: tx.output_index, asset: "BTC", amount: "0.002", fiat_value: "80", rate: "40000", rate_basis: "market", rate_sources: ["bitstamp", "coinbase", "kraken"], seen_at: String },
  ]);
  const valuation = event.data.valuation as { valued_at: string; transactions: { seen_at: string }[] };
  t.ok(Date.parse(valuation.valued_at) > Date.parse(valuation.transactions[0]!.seen_at), "valued after it was seen");
  const c = dashboardClient(base);
  t.equal((await c.signIn(m.key)).status, 303);
  const page = await c.get(`/dashboard/payments/${pi.public_id}`);
  t.equal(page.status, 200);
  const timeline = /<ol class="timeline" id="timeline">([\s\S]*?)<\/ol>/.exec(page.body)?.[1] ?? "";
  t.match(timeline, "payment.late");
  t.match(timeline, "payment.valued", "the dashboard's timeline shows it");
  t.ok(timeline.indexOf("payment.valued") > timeline.indexOf("payment.late"), "after the late payment");

  // Fixed once: the market moving again, and more sweeps, change nothing.
  for (const e of ex.all) e.prices.set("BTC-USD", "45000.00");
  await until("the engine quotes 45,000", async () => {
    const probe = await create(btcPrice);
    return probe.status === 200 && probe.body.data.quote.rate === "45000";
  }, 10_000);
  t.equal((await read(pi.public_id)).transactions[0].fiat_value, "80", "kept as it was valued");
  t.equal((await eventsOf(pi.public_id)).length, 1, "still told once");
});

t.test("two sweeps at once: each payment valued and told once", async (t) => {
  for (const e of ex.all) e.prices.set("BTC-USD", "50000.00");
  const intents = [await quotedIntent("50000"), await quotedIntent("50000"), await quotedIntent("50000")];
  await outage();
  t.teardown(() => {
    for (const e of ex.all) e.down = false;
  });
  for (const pi of intents) await paidLateWithoutRate(t, pi.public_id);

  // The app's own sweep has no rate (its sources are down); these have the development source's
  // (1 BTC = 50,000 USD), as two other processes would with theirs.
  const engine = new RateEngine({ sources: ["fixed"], urls: {}, refreshSeconds: 60, maxAgeSeconds: 3600, maxSpreadBps: 100, minSources: 1, stablecoinPeg: true });
  await engine.refresh();
  const mine = new Intents(new IntentViews("https://checkout.example.test"), undefined, engine);

  // One holds the intents (its transaction open) while the other runs: it finds nothing to take.
  await app.db.em.fork().transactional(async (tx) => {
    const held = await valueDue(tx, mine, intentOutputs, 1);
    t.same(held, { claimed: 1, valued: 1 }, "the first sweep values the oldest");
    const other = await valueDue(app.db.em.fork(), mine, intentOutputs, 1);
    t.same(other, { claimed: 1, valued: 1 }, "the second skips it, and values the next");
  });
  // Both at once, over what is left and what was taken: every payment valued once in all.
  const passes = await Promise.all([valueDue(app.db.em.fork(), mine, intentOutputs), valueDue(app.db.em.fork(), mine, intentOutputs)]);
  t.equal(passes.reduce((n, p) => n + p.valued, 0), 1, "the last one, by one of them");
  t.same(await valueDue(app.db.em.fork(), mine, intentOutputs), { claimed: 0, valued: 0 }, "nothing is left");
  for (const pi of intents) {
    t.equal((await read(pi.public_id)).transactions[0].fiat_value, "100", `${pi.public_id}: 0.002 BTC at 50,000 USD`);
    t.equal((await eventsOf(pi.public_id)).length, 1, `${pi.public_id}: one payment.valued`);
    t.equal(await dueSince(pi.public_id), null);
  }
});
