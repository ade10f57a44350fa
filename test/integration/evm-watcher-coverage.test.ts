// What the EVM watcher counts when its node's answers fall short, against a real node (anvil)
// behind a JSON-RPC proxy; the watcher runs in the app's process and intents are read through REST.
//  - A provider whose eth_getLogs comes from a replica behind the one that served the blocks
//    answers `[]` for the block that holds a USDC payment: the block's logs bloom says a watched
//    transfer may be in it, so the watcher reads its logs again by hash and counts the payment.
//  - A call with value to a deposit address that reverts (code there, as a contract or an EIP-7702
//    delegation puts it) still carries its value in the transaction: it counts for nothing.
// Absence is shown by a sentinel: a later payment, to another intent, counted.
import t from "tap";
import { parseEther, type Hex } from "viem";
import { signPayment, startDevChain } from "../../scripts/devchain/chain.ts";
import { call, idemKey, until } from "../helpers/harness.ts";
import { startRpcProxy } from "../helpers/rpc-proxy.ts";
import { webhookSetup } from "../helpers/webhooks.ts";

const dev = await startDevChain();
t.teardown(() => dev.stop());
const proxy = await startRpcProxy(t, dev.url);
const s = await webhookSetup(t, { env: { ETHEREUM_TEST_RPC_URL: proxy.url, ETHEREUM_CONFIRMATIONS: "3", WATCHER_POLL_MS: "100" } });
const { base, creds: a } = s;
const intentsPath = `/api/v1/merchants/${a.merchant}/payment-intents`;

async function createIntent(asset: string, amount: string) {
  const res = await call(base, "POST", intentsPath, { key: a.key, idempotencyKey: idemKey(), body: { network: "ethereum", asset, requested_amount: amount } });
  if (res.status !== 200) throw new Error(`create: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data as { public_id: string; deposit_address: Hex };
}
const get = async (id: string) => (await call(base, "GET", `${intentsPath}/${id}`, { key: a.key })).body.data;
const confirmed = (id: string) =>
  until(`${id} confirmed`, async () => {
    const pi = await get(id);
    return pi.status === "confirmed" ? pi : undefined;
  }, 30_000, () => "");

t.test("logs answered `[]` for the block of a USDC payment: the block is read again and the payment counted", async (t) => {
  const pi = await createIntent("USDC", "5");
  const paid = await signPayment(dev, pi.deposit_address, "5", "USDC", 6);
  const height = Number(await dev.public.getBlockNumber()) + 1;
  proxy.emptyLogsAt = height;
  await dev.test.mine({ blocks: 3 });
  t.equal((await dev.public.getTransactionReceipt({ hash: paid.hash })).blockNumber, BigInt(height), "the payment is in that block");

  // The sentinel: a payment in a later block, counted once the watcher is past the payment's block.
  const later = await createIntent("USDC", "1");
  await signPayment(dev, later.deposit_address, "1", "USDC", 6);
  await dev.test.mine({ blocks: 3 });
  await confirmed(later.public_id);
  t.equal(proxy.emptyLogsAt, undefined, "the proxy answered `[]` for the payment's block");
  const now = await get(pi.public_id);
  t.same([now.status, now.amount_received, now.transactions.map((x: { tx_hash: string }) => x.tx_hash)], ["confirmed", "5", [paid.hash]], "the payment counted");
});

t.test("a call with value to a deposit address that reverts: nothing counted", async (t) => {
  const pi = await createIntent("ETH", "0.5");
  // PUSH1 0, PUSH1 0, REVERT: whatever is sent to the address reverts.
  await dev.test.setCode({ address: pi.deposit_address, bytecode: "0x60006000fd" });
  // An explicit gas limit: no estimate refuses the call, and the node mines it, reverted.
  const hash = await dev.wallet.sendTransaction({ account: dev.payer, chain: dev.wallet.chain, to: pi.deposit_address, value: parseEther("0.5"), gas: 100_000n });
  await dev.test.mine({ blocks: 1 });
  const receipt = await dev.public.getTransactionReceipt({ hash });
  t.same([receipt.status, receipt.to?.toLowerCase()], ["reverted", pi.deposit_address.toLowerCase()], "mined, reverted, with its value in the transaction");

  const later = await createIntent("ETH", "0.25");
  await signPayment(dev, later.deposit_address, "0.25", "ETH", 18);
  await dev.test.mine({ blocks: 3 });
  t.equal((await confirmed(later.public_id)).amount_received, "0.25", "the sentinel, an ordinary transfer, counts");
  const now = await get(pi.public_id);
  t.same([now.status, now.amount_received, now.transactions], ["pending", null, []], "the reverted call is not a payment");
});
