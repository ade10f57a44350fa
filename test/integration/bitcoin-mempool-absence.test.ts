// A 0-confirmation bitcoin payment leaves the mempool view only for a reason (issue 46): bcoin on
// regtest behind the Bitcoin Core relay and a JSON-RPC proxy that makes the node answer an empty
// mempool (a failover, a balancer's switch) or say it has not loaded its mempool yet (restarted,
// still reading mempool.dat). Neither withdraws the payment: it stays `confirmed`, no
// payment.reorged. A real conflict (a double spend mined by a second node) withdraws it at the
// first report without it, with one payment.reorged. MEMPOOL_ABSENT_SECONDS is short here (8 s,
// 3 reads) so that the node that is not loaded is watched for longer than the absence rule.
import t, { type Test } from "tap";
import { applyConfirmationRule } from "../../services/policy/policy.ts";
import { startRegtest } from "../helpers/bitcoin-regtest.ts";
import { call, idemKey, until } from "../helpers/harness.ts";
import { startRpcProxy } from "../helpers/rpc-proxy.ts";
import { notDetected, signedEvents, webhookSetup } from "../helpers/webhooks.ts";

const absentSeconds = 8;
const chain = await startRegtest();
t.teardown(() => chain.stop());
const relay = new URL(chain.url);
const proxy = await startRpcProxy(t, `http://${relay.host}/`, { bitcoin: true });
const watcherUrl = `http://${relay.username}:${relay.password}@127.0.0.1:${proxy.port}`;
const s = await webhookSetup(t, { env: { BITCOIN_TEST_RPC_URL: watcherUrl, WATCHER_POLL_MS: "100", MEMPOOL_ABSENT_READS: "3", MEMPOOL_ABSENT_SECONDS: String(absentSeconds) } });
const { base, creds: a } = s;
const hooks = await s.createEndpoint("/all");
// Below 0.01 BTC counts from the mempool.
await applyConfirmationRule(s.app.db.em.fork(), { merchantId: a.merchant, environment: "test" }, {
  network: "bitcoin",
  asset: "BTC",
  confirmations: 2,
  belowAmount: "0.01",
  belowConfirmations: 0,
  allowUnconfirmed: true,
});

const intentsPath = `/api/v1/merchants/${a.merchant}/payment-intents`;
async function createIntent(amount: string) {
  const res = await call(base, "POST", intentsPath, { key: a.key, idempotencyKey: idemKey(), body: { network: "bitcoin", asset: "BTC", requested_amount: amount } });
  if (res.status !== 200) throw new Error(`create: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data as { public_id: string; deposit_address: string; required_confirmations: number };
}
const get = async (id: string) => (await call(base, "GET", `${intentsPath}/${id}`, { key: a.key })).body.data;
type Tx = { tx_hash: string; counted: boolean; reason: string | null; confirmations: number };

function shows(id: string, txid: string, what: string, ok: (x: Tx) => boolean) {
  return until(`${id}: ${what}`, async () => {
    const pi = await get(id);
    const x = (pi.transactions ?? []).find((x: Tx) => x.tx_hash === txid);
    return x && ok(x) ? pi : undefined;
  }, 20_000);
}

/** A small payment, counted from the mempool: the intent confirmed with 0 confirmations. */
async function paidAtZero(t: Test) {
  const pi = await createIntent("0.004");
  t.equal(pi.required_confirmations, 0);
  const paid = await chain.pay([{ address: pi.deposit_address, btc: "0.004" }]);
  const now = await shows(pi.public_id, paid.txid, "counted from the mempool", (x) => x.counted);
  t.same([now.status, now.transactions[0].confirmations], ["confirmed", 0]);
  return { pi, paid };
}

/** The events the endpoint received for the intent: type by event id (a redelivery is the same event). */
const eventsOf = (id: string) => {
  const byId = new Map<string, string>();
  for (const e of signedEvents(s.receiver, hooks.secret, "/all")) if (e.data.payment_intent?.public_id === id && notDetected(e)) byId.set(e.id, e.type);
  return [...byId.values()].sort();
};
/** Sentinel: a new payment counted at 0 and its payment.confirmed received; events recorded before it were delivered by then. */
async function sentinel(t: Test) {
  const { pi } = await paidAtZero(t);
  await until("the sentinel's payment.confirmed", async () => eventsOf(pi.public_id).includes("payment.confirmed"), 20_000, () => JSON.stringify(eventsOf(pi.public_id)));
}
const reorgedRecorded = async (id: string) =>
  (await s.app.db.em.fork().execute<{ n: number }[]>(`select count(*)::int as n from webhook_events where payment_intent_id = ? and type = 'payment.reorged'`, [id]))[0]?.n;
const absentReads = async (txid: string) =>
  (await s.app.db.em.fork().execute<{ reads: number; orphaned: boolean }[]>(`select mempool_absent_reads as reads, orphaned from chain_observations where tx_hash = ?`, [txid]))[0];
const calls = (method: string) => proxy.calls.get(method) ?? 0;
/** The node answers as it is again when the subtest ends, passed or not. */
const healedAfter = (t: Test) =>
  t.teardown(() => {
    proxy.emptyMempool = false;
    proxy.mempoolUnloaded = false;
  });

t.test("a node that answers an empty mempool for a few reads withdraws nothing: the 0-confirmation payment stays confirmed", async (t) => {
  healedAfter(t);
  const { pi, paid } = await paidAtZero(t);
  const from = calls("getrawmempool");
  const emptyAt = Date.now();
  proxy.emptyMempool = true;
  // Several reads of the empty mempool, each reported (the core counts the payment missing).
  await until("six reads of an empty mempool", async () => calls("getrawmempool") >= from + 6, 20_000);
  const during = await get(pi.public_id);
  t.same([during.status, during.amount_received, during.transactions[0].reason], ["confirmed", "0.004", null], "still confirmed, its payment still counted");
  const counted = await until("the core counted reports without it", async () => {
    const row = await absentReads(paid.txid);
    return row && row.reads >= 3 ? row : undefined;
  }, 20_000);
  t.ok(Date.now() - emptyAt < absentSeconds * 1000, `within MEMPOOL_ABSENT_SECONDS (${absentSeconds} s) of the first read without it`);
  t.same([counted.orphaned, (await get(pi.public_id)).status], [false, "confirmed"], `missing from ${counted.reads} reports, yet not withdrawn`);

  proxy.emptyMempool = false;
  await until("seen again: no longer missing", async () => (await absentReads(paid.txid))?.reads === 0, 20_000);
  await sentinel(t);
  t.same(eventsOf(pi.public_id), ["payment.confirmed", "payment.intent.created"], "no payment.reorged: the checkout page still says it is paid");
  t.equal(await reorgedRecorded(pi.public_id), 0, "none recorded either");
});

t.test("a node that has not loaded its mempool (getmempoolinfo loaded: false) withdraws nothing, however long", async (t) => {
  healedAfter(t);
  const { pi, paid } = await paidAtZero(t);
  const [polls, asked] = [calls("getblockcount"), calls("getmempoolinfo")];
  const since = Date.now();
  proxy.mempoolUnloaded = true;
  proxy.emptyMempool = true;
  // Longer than the absence rule, over many polls: restarted nodes take minutes to load mempool.dat.
  await until(`many polls over more than ${absentSeconds} s`, async () => calls("getblockcount") >= polls + 20 && Date.now() - since > (absentSeconds + 1) * 1000, 40_000);
  const during = await get(pi.public_id);
  t.same([during.status, during.amount_received, during.transactions[0].reason], ["confirmed", "0.004", null], "still confirmed");
  t.ok(calls("getmempoolinfo") >= asked + 10, "the watcher asked at each read whether the mempool is loaded");
  t.same(await absentReads(paid.txid), { reads: 0, orphaned: false }, "no read of it was reported: nothing counted missing");

  proxy.mempoolUnloaded = false;
  proxy.emptyMempool = false;
  await sentinel(t);
  t.same(eventsOf(pi.public_id), ["payment.confirmed", "payment.intent.created"], "no payment.reorged");
  t.equal(await reorgedRecorded(pi.public_id), 0, "none recorded either");
});

t.test("a double spend mined by another node withdraws the payment at the first report without it: payment.reorged once", async (t) => {
  const { pi, paid } = await paidAtZero(t);
  const other = await chain.pay([], { coinbase: paid.coinbase, send: false, fee: 20_000 });
  await chain.mineElsewhere(other.raw);
  const back = await shows(pi.public_id, paid.txid, "withdrawn", (x) => x.reason === "withdrawn");
  t.same([back.status, back.amount_received], ["pending", "0"]);
  t.same(await absentReads(paid.txid), { reads: 1, orphaned: true }, "withdrawn by the first report it was missing from: the conflict, not the absence rule");

  // Sentinel on the same intent: paid again, confirmed again; the withdrawn payment stays out.
  const again = await chain.pay([{ address: pi.deposit_address, btc: "0.004" }]);
  await shows(pi.public_id, again.txid, "the new payment counted", (x) => x.counted);
  const events = await until("4 events", async () => (eventsOf(pi.public_id).length >= 4 ? eventsOf(pi.public_id) : undefined), 20_000, () => JSON.stringify(eventsOf(pi.public_id)));
  t.same(events, ["payment.confirmed", "payment.confirmed", "payment.intent.created", "payment.reorged"], "payment.reorged once");
  t.equal(await reorgedRecorded(pi.public_id), 1);
});
