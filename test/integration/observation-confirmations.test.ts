// What a report can and cannot change, through ObservationService over gRPC (a watcher's
// credential, Test) with each event delivered as a signed webhook: a lower confirmation count
// for the same block (a node that lags) un-counts nothing and sends no payment.reorged; a block
// that was orphaned and comes back to the best chain (reported again, same block) counts again.
import t from "tap";
import { call, idemKey, sampleIntent, until } from "../helpers/harness.ts";
import { hash, watcherClient } from "../helpers/lifecycle.ts";
import { eventsOnce, webhookSetup } from "../helpers/webhooks.ts";

const s = await webhookSetup(t);
const { base, creds: a } = s;
const endpoint = await s.createEndpoint();
const { client, headers } = await watcherClient(s.app, s.rpcUrl, "test");
const path = `/api/v1/merchants/${a.merchant}/payment-intents`;

async function createIntent() {
  const res = await call(base, "POST", path, { key: a.key, idempotencyKey: idemKey(), body: { ...sampleIntent, requested_amount: "10" } });
  if (res.status !== 200) throw new Error(`create: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data as { public_id: string; deposit_address: string; required_confirmations: number };
}
const get = async (id: string) => (await call(base, "GET", `${path}/${id}`, { key: a.key })).body.data;
const eventsOf = (id: string) => eventsOnce(s.receiver, endpoint.secret).filter((e) => e.data.payment_intent?.public_id === id).map((e) => e.type);
const observe = (pi: { deposit_address: string }, confirmations: number, tx: string, block: string) =>
  client.recordObservation(
    { network: "ethereum", asset: "USDC", toAddress: pi.deposit_address, txHash: tx, outputIndex: 0, amount: "10", confirmations, blockHeight: 100n, blockHash: block },
    { headers },
  );

t.test("a lower count for the same block un-counts nothing", async (t) => {
  const pi = await createIntent();
  const [tx, block] = [hash(), hash()];
  t.equal((await observe(pi, pi.required_confirmations, tx, block)).paymentIntentStatus, "confirmed");
  const lower = await observe(pi, 1, tx, block);
  t.equal(lower.paymentIntentStatus, "confirmed", "still confirmed");
  t.equal(lower.data?.counted, true, "still counted");
  t.equal(lower.data?.confirmations, pi.required_confirmations, "the count stays at the highest reported for that block");
  // A sentinel after it: an event of another intent, recorded after the lower report.
  const sentinel = await createIntent();
  await observe(sentinel, sentinel.required_confirmations, hash(), hash());
  await until("the sentinel's payment.confirmed", async () => eventsOf(sentinel.public_id).includes("payment.confirmed"), 20_000);
  t.same(eventsOf(pi.public_id).sort(), ["payment.confirmed", "payment.intent.created"], "no payment.reorged");
  t.equal((await get(pi.public_id)).transactions[0].confirmations, pi.required_confirmations);
});

t.test("another block's count is its own; a block that comes back counts again", async (t) => {
  const pi = await createIntent();
  const [tx, block] = [hash(), hash()];
  await observe(pi, pi.required_confirmations, tx, block);
  const reorg = await client.recordReorg({ network: "ethereum", orphanedBlockHashes: [block] }, { headers });
  t.same(reorg.paymentIntentIds, [pi.public_id]);
  t.equal((await get(pi.public_id)).status, "pending", "orphaned: un-counted");
  const back = await observe(pi, pi.required_confirmations + 1, tx, block);
  t.equal(back.paymentIntentStatus, "confirmed", "its block back on the best chain: counted again");
  const elsewhere = await observe(pi, 1, tx, hash());
  t.equal(elsewhere.data?.confirmations, 1, "mined in another block: that block's count");
  t.equal(elsewhere.paymentIntentStatus, "pending");
  // payment.detected too ("*" takes it): funds seen that do not count yet, at 1 confirmation in the other block.
  await until("six events", async () => eventsOf(pi.public_id).length >= 6, 20_000, () => JSON.stringify(eventsOf(pi.public_id)));
  t.same(eventsOf(pi.public_id).sort(), ["payment.confirmed", "payment.confirmed", "payment.detected", "payment.intent.created", "payment.reorged", "payment.reorged"]);
});
