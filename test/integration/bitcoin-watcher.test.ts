// The Bitcoin watcher against a real node: bcoin on regtest, reached through Bitcoin Core's RPC
// (bcoin's differences translated in test/helpers/bcoin-compat.ts), payments made with real
// signed transactions to the BIP84 deposit addresses the service hands out (tb1…, the node
// writes them rb1…: matched by script), followed by the watcher role in the app's process and
// counted through the real REST API, each event delivered once as a signed webhook.
import t from "tap";
import { setAccountKey } from "../../services/addresses/admin.ts";
import { startRegtest } from "../helpers/bitcoin-regtest.ts";
import { call, idemKey, merchantWithKey, until } from "../helpers/harness.ts";
import { signedEvents, webhookSetup } from "../helpers/webhooks.ts";

const chain = await startRegtest();
t.teardown(() => chain.stop());
// BTC counts at 2 confirmations by default; the test keeps it.
const s = await webhookSetup(t, { env: { BITCOIN_TEST_RPC_URL: chain.url, WATCHER_POLL_MS: "100" } });
const { base, creds: a } = s;
const endpoint = await s.createEndpoint();
const intentsPath = (m = a.merchant) => `/api/v1/merchants/${m}/payment-intents`;

async function createIntent(body: Record<string, unknown>, c = a) {
  const res = await call(base, "POST", intentsPath(c.merchant), { key: c.key, idempotencyKey: idemKey(), body: { network: "bitcoin", asset: "BTC", ...body } });
  if (res.status !== 200) throw new Error(`create: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data as { public_id: string; deposit_address: string };
}
const get = async (id: string, c = a) => (await call(base, "GET", `${intentsPath(c.merchant)}/${id}`, { key: c.key })).body.data;
const pay = (pi: { deposit_address: string }, ...btc: string[]) => chain.pay(btc.map((amount) => ({ address: pi.deposit_address, btc: amount })));
type Tx = { tx_hash: string; output_index: number; confirmations: number; counted: boolean; amount: string };

/**
 * Waits until the intent shows `outputs` outputs of `txid`, every one at `confirmations` (a GET is
 * one snapshot: its status goes with them; the outputs of one transaction are recorded one by one).
 */
function seen(id: string, txid: string, confirmations: number, outputs = 1) {
  return until(`${id} shows ${outputs} output(s) of ${txid} at ${confirmations} confirmations`, async () => {
    const pi = await get(id);
    const found = (pi.transactions ?? []).filter((x: Tx) => x.tx_hash === txid);
    return found.length >= outputs && found.every((x: Tx) => x.confirmations === confirmations) ? pi : undefined;
  }, 20_000, () => "");
}

/**
 * The event types the receiver got for an intent (signatures checked), each event once (delivery is
 * at least once), in any order; payment.detected aside ("*" takes it): it comes or not as the
 * watcher first sees a payment in the mempool or below its confirmations, or already at them; the
 * first test asserts it where it must come.
 */
const eventsOf = (id: string, detected = false) =>
  [...new Map(signedEvents(s.receiver, endpoint.secret).map((e) => [e.id, e])).values()]
    .filter((e) => e.data.payment_intent?.public_id === id && (detected || e.type !== "payment.detected"))
    .map((e) => e.type)
    .sort();
const events = (id: string, count: number) =>
  until(`events of ${id}`, async () => (eventsOf(id).length >= count ? eventsOf(id) : undefined), 20_000, () => JSON.stringify(eventsOf(id)));

t.test("a P2WPKH payment counts exactly at the threshold, to the satoshi, as a signed webhook", async (t) => {
  const pi = await createIntent({ requested_amount: "0.00123457" });
  t.match(pi.deposit_address, /^tb1q/, "a BIP84 testnet address; the regtest node writes it rb1…");
  const { txid } = await pay(pi, "0.00123457");
  await chain.mine();
  let now = await seen(pi.public_id, txid, 1);
  t.equal(now.status, "pending", "1 of 2 confirmations: seen, not counted");
  t.same([now.transactions[0].counted, now.transactions[0].amount], [false, "0.00123457"]);
  await chain.mine();
  now = await seen(pi.public_id, txid, 2);
  t.equal(now.status, "confirmed", "at 2 it counts");
  t.equal(now.amount_received, "0.00123457");
  t.same(await events(pi.public_id, 2), ["payment.confirmed", "payment.intent.created"]);
  const withDetected = await until("payment.detected too", async () => (eventsOf(pi.public_id, true).length >= 3 ? eventsOf(pi.public_id, true) : undefined), 20_000);
  t.same(withDetected, ["payment.confirmed", "payment.detected", "payment.intent.created"], "and payment.detected, seen at 1 of 2: \"*\" takes it");
});

t.test("two outputs of one transaction add up; a top-up in a later one too", async (t) => {
  const pi = await createIntent({ requested_amount: "1" });
  const split = await pay(pi, "0.25", "0.5");
  await chain.mine(2);
  let now = await seen(pi.public_id, split.txid, 2, 2);
  t.equal(now.status, "underpaid", "0.75 of 1");
  t.equal(now.amount_received, "0.75");
  t.same(now.transactions.map((x: Tx) => [x.output_index, x.amount]).sort(), [[0, "0.25"], [1, "0.5"]], "each output by its index");
  const topUp = await pay(pi, "0.25");
  await chain.mine(2);
  now = await seen(pi.public_id, topUp.txid, 2);
  t.equal(now.status, "confirmed");
  t.equal(now.amount_received, "1");
  t.same(await events(pi.public_id, 3), ["payment.confirmed", "payment.intent.created", "payment.underpaid"]);
});

t.test("overpaid; paid after expiry: late", async (t) => {
  const over = await createIntent({ requested_amount: "0.1" });
  const tx = await pay(over, "0.10000001");
  await chain.mine(2);
  const o = await seen(over.public_id, tx.txid, 2);
  t.same([o.status, o.amount_received], ["overpaid", "0.10000001"]);

  const pi = await createIntent({ requested_amount: "0.2", expires_in_seconds: 60 });
  await s.app.db.em.fork().execute(`update payment_intents set expires_at = now() - interval '1 second' where id = ?`, [pi.public_id]);
  await until("expired by the scheduler", async () => (await get(pi.public_id)).status === "expired", 10_000);
  const late = await pay(pi, "0.2");
  await chain.mine(2);
  t.equal((await seen(pi.public_id, late.txid, 2)).status, "late");
  t.same(await events(pi.public_id, 3), ["payment.expired", "payment.intent.created", "payment.late"]);
});

t.test("a longer competing chain takes a counted payment away; mined again, it counts again; each event once", async (t) => {
  const pi = await createIntent({ requested_amount: "0.3" });
  const fork = await chain.height();
  const { txid, raw } = await pay(pi, "0.3");
  await chain.mine(2);
  t.equal((await seen(pi.public_id, txid, 2)).status, "confirmed");
  // Three blocks from a competitor replace the payment's two, without it.
  await chain.reorg(fork, 3);
  const gone = await until("the reorg seen", async () => {
    const now = await get(pi.public_id);
    return now.status === "pending" ? now : undefined;
  }, 20_000);
  t.equal(gone.amount_received, "0");
  t.equal(gone.transactions.find((x: Tx) => x.tx_hash === txid)?.counted, false, "the output stays on record, not counted");
  await chain.rpc("sendrawtransaction", [raw]);
  await chain.mine(2);
  const back = await until("counted again", async () => {
    const now = await get(pi.public_id);
    return now.status !== "pending" ? now : undefined;
  }, 20_000);
  t.equal(back.status, "confirmed", "the same transaction in the new chain counts again");
  t.equal(back.amount_received, "0.3");
  t.same(await events(pi.public_id, 4), ["payment.confirmed", "payment.confirmed", "payment.intent.created", "payment.reorged"]);
  // The work the core compared the branches by is the watcher's sum from the headers' bits, above
  // regtest's block 0: 2 for each block at regtest's target (2^256 / (0x7fffff · 2^232 + 1)).
  const blocks = await s.app.db.em.fork().execute<{ height: string; work: string | null }[]>(
    `select height, work from chain_blocks where network = 'bitcoin' and environment = 'test' and best and height > ? order by height`,
    [fork - 2],
  );
  t.ok(blocks.length >= 5, "the best chain's blocks around the fork are kept");
  t.same(blocks.map((b) => [Number(b.height), b.work === null ? null : BigInt(b.work)]), blocks.map((b) => [Number(b.height), 2n * BigInt(b.height)]), "each block's work: 2 × its height");
});

t.test("a Live intent's address, an address of no intent: nothing counted", async (t) => {
  const live = await merchantWithKey(s.app, "live", undefined, a.merchant);
  // BIP 84's published account key: Live bitcoin addresses come from the merchant's own zpub.
  await setAccountKey(s.app.db.em.fork(), a.merchant, "live", "bitcoin", "zpub6rFR7y4Q2AijBEqTUquhVz398htDFrtymD9xYYfG1m4wAcvPhXNfE3EfH1r1ADqtfSdVCToUG868RvUUkgDKf31mGDtKsAYz2oz2AGutZYs");
  const livePi = await createIntent({ requested_amount: "0.01" }, live);
  t.match(livePi.deposit_address, /^bc1q/);
  // A Live address's script is a valid output script on any chain: only the environment keeps it apart.
  await chain.pay([{ address: livePi.deposit_address, btc: "0.01" }]);
  const stranger = "tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx";
  await chain.pay([{ address: stranger, btc: "0.01" }]);
  await chain.mine(2);
  // The sentinel: a payment in a later block, to another intent, seen and counted.
  const sentinel = await createIntent({ requested_amount: "0.01" });
  const tx = await pay(sentinel, "0.01");
  await chain.mine(2);
  t.equal((await seen(sentinel.public_id, tx.txid, 2)).status, "confirmed");
  const l = await get(livePi.public_id, live);
  t.same([l.status, l.transactions], ["pending", []], "a Test chain's payment never matches a Live intent");
  const rows = await s.app.db.em.fork().execute<{ n: string }[]>(`select count(*) as n from chain_observations where to_address = ?`, [stranger]);
  t.equal(Number(rows[0]?.n), 0, "an address of no intent is not watched, so nothing is recorded");
});

t.test("the watcher's position and lease are durable, and its metrics are served", async (t) => {
  const head = await chain.height();
  await until("the position at the head", async () => {
    const [r] = await s.app.db.em.fork().execute<{ height: string }[]>(`select height from chain_watchers where network = 'bitcoin' and environment = 'test'`);
    return Number(r?.height) === head || undefined;
  }, 20_000);
  const [tip] = await s.app.db.em.fork().execute<{ height: string; hash: string }[]>(
    `select height, hash from chain_blocks where network = 'bitcoin' and environment = 'test' and best order by height desc limit 1`,
  );
  t.equal(Number(tip?.height), head, "the core keeps the chain up to the head");
  t.match(tip?.hash, /^[0-9a-f]{64}$/, "bitcoin's block hashes, as the node writes them");
  const metrics = await (await fetch(`http://127.0.0.1:${s.app.ports.ops}/metrics`)).text();
  t.match(metrics, new RegExp(`chain_head_height\\{network="bitcoin",environment="test"\\} ${head}`));
  t.match(metrics, /chain_watcher_active\{network="bitcoin",environment="test"\} 1/);
  t.match(metrics, /chain_observations_reported_total\{network="bitcoin",environment="test"\} [1-9]/);
  t.match(metrics, /chain_reorged_blocks_total\{network="bitcoin",environment="test"\} [1-9]/);
  // As a host's port (":38795"), not as digits: a heap's byte count may hold the same five digits.
  t.notMatch(metrics, new RegExp(`:${chain.port}(?!\\d)`), "the node's URL is not in the metrics");
});
