// A Test chain that starts over is a new chain, not a reorg: the dev chain (anvil) followed
// past block 30, then stopped and a fresh one started behind the same node URL (a proxy of
// ours), where a payment is made in its first blocks before the watcher looks. The payment
// is counted; what was counted on the old chain stays counted, with no payment.reorged.
import t from "tap";
import type { Hex } from "viem";
import { signPayment, startDevChain, type DevChain } from "../../scripts/devchain/chain.ts";
import { call, idemKey, until } from "../helpers/harness.ts";
import { startRpcProxy } from "../helpers/rpc-proxy.ts";
import { eventsOnce, notDetected, webhookSetup } from "../helpers/webhooks.ts";

const first = await startDevChain();
t.teardown(() => first.stop());
const node = await startRpcProxy(t, first.url);
const s = await webhookSetup(t, { env: { ETHEREUM_TEST_RPC_URL: node.url, ETHEREUM_CONFIRMATIONS: "2", WATCHER_POLL_MS: "100", WATCHER_NODE_PROOF_SECONDS: "1" } });
const { base, creds: a } = s;
const endpoint = await s.createEndpoint();
const path = `/api/v1/merchants/${a.merchant}/payment-intents`;

async function createIntent(amount: string) {
  const res = await call(base, "POST", path, { key: a.key, idempotencyKey: idemKey(), body: { network: "ethereum", asset: "USDC", requested_amount: amount } });
  if (res.status !== 200) throw new Error(`create: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data as { public_id: string; deposit_address: Hex; asset: string };
}
const get = async (id: string) => (await call(base, "GET", `${path}/${id}`, { key: a.key })).body.data;
const pay = (dev: DevChain, pi: { deposit_address: Hex }, amount: string) => signPayment(dev, pi.deposit_address, amount, "USDC", 6);
const statusIs = (id: string, status: string) => until(`${id} ${status}`, async () => ((await get(id)).status === status ? true : undefined), 60_000, () => status);
const eventsOf = (id: string) => eventsOnce(s.receiver, endpoint.secret).filter((e) => e.data.payment_intent?.public_id === id && notDetected(e)).map((e) => e.type);
const processed = async () => Number(/^chain_processed_height\{network="ethereum",environment="test"\} (\S+)$/m.exec(await (await fetch(`http://127.0.0.1:${s.app.ports.ops}/metrics`)).text())?.[1]);

t.test("a dev chain started again from genesis: its payments count, the old chain's stay counted", async (t) => {
  const old = await createIntent("5");
  await pay(first, old, "5");
  await first.test.mine({ blocks: 30 });
  await statusIs(old.public_id, "confirmed");
  const oldHead = Number(await first.public.getBlockNumber());
  await until("the old chain processed to its head", async () => (await processed()) === oldHead, 30_000);

  await first.stop();
  const second = await startDevChain();
  t.teardown(() => second.stop());
  const fresh = await createIntent("7");
  const { hash } = await pay(second, fresh, "7");
  await second.test.mine({ blocks: 2 });
  const paidAt = Number((await second.public.getTransactionReceipt({ hash })).blockNumber);
  t.ok(paidAt < oldHead - 20, `the payment is in block ${paidAt}, far below the old chain's ${oldHead}`);
  node.retarget(second.url);

  await statusIs(fresh.public_id, "confirmed");
  const f = await get(fresh.public_id);
  t.equal(f.amount_received, "7");
  t.equal(f.transactions[0].tx_hash, hash);
  await until("the new payment's webhook", async () => eventsOf(fresh.public_id).includes("payment.confirmed"), 30_000);
  const o = await get(old.public_id);
  t.equal(o.status, "confirmed", "the old chain's payment keeps its state");
  t.equal(o.transactions[0].counted, true);
  t.same(eventsOf(old.public_id).sort(), ["payment.confirmed", "payment.intent.created"], "no payment.reorged for a chain that was replaced");
});
