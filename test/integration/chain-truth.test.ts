// The core owns chain truth, against real nodes: two anvil chains started alike (the same blocks,
// hash for hash, until they part) behind one JSON-RPC proxy stand for one chain whose node
// switches branches; the watcher runs in the app's process and the intents are read through REST,
// with each event delivered once as a signed webhook.
//  - A fork from the payment's own block, then the old branch winning back: counted, un-counted,
//    counted again, each event once.
//  - A transaction paying two intents, reorged and mined again after another log (so its logs'
//    block-wide logIndex moves): each intent counts it once and lists it once, and a later
//    payment on the chain is counted.
import t from "tap";
import { encodeFunctionData, parseUnits, type Hex, type WalletClient } from "viem";
import { signPayment, startDevChain, tokenAbi } from "../../scripts/devchain/chain.ts";
import { call, idemKey, until } from "../helpers/harness.ts";
import { startRpcProxy } from "../helpers/rpc-proxy.ts";
import { createUsdcIntent, eventsOnce, notDetected, webhookSetup } from "../helpers/webhooks.ts";

const genesisTimestamp = 1_700_000_000;
const [nodeA, nodeB] = await Promise.all([startDevChain({ genesisTimestamp }), startDevChain({ genesisTimestamp })]);
t.teardown(() => Promise.all([nodeA.stop(), nodeB.stop()]));
const proxy = await startRpcProxy(t, nodeA.url);
const s = await webhookSetup(t, { env: { ETHEREUM_TEST_RPC_URL: proxy.url, ETHEREUM_CONFIRMATIONS: "3", WATCHER_POLL_MS: "100" } });
const { base, creds: a } = s;
const endpoint = await s.createEndpoint();
const intentsPath = `/api/v1/merchants/${a.merchant}/payment-intents`;

const createIntent = (amount: string) => createUsdcIntent(s, amount);
const get = async (id: string) => (await call(base, "GET", `${intentsPath}/${id}`, { key: a.key })).body.data;
const statusIs = (id: string, status: string) =>
  until(`${id} ${status}`, async () => {
    const pi = await get(id);
    return pi.status === status ? pi : undefined;
  }, 30_000, () => "");
const eventsOf = (id: string) => eventsOnce(s.receiver, endpoint.secret).filter((e) => e.data.payment_intent?.public_id === id && notDetected(e)).map((e) => e.type).sort();
const eventsAtLeast = (id: string, n: number) => until(`${n} events of ${id}`, async () => (eventsOf(id).length >= n ? eventsOf(id) : undefined), 20_000, () => JSON.stringify(eventsOf(id)));

t.test("the two nodes serve the same chain until it parts", async (t) => {
  const [a0, b0, a1, b1] = await Promise.all([nodeA.public.getBlock({ blockNumber: 0n }), nodeB.public.getBlock({ blockNumber: 0n }), nodeA.public.getBlock(), nodeB.public.getBlock()]);
  t.equal(a0.hash, b0.hash, "block 0");
  t.same([a1.number, a1.hash], [b1.number, b1.hash], "and the head");
});

t.test("a fork from the payment's block, then the old branch winning back: counted, un-counted, counted again, each event once", async (t) => {
  const pi = await createIntent("5");
  const paid = await signPayment(nodeA, pi.deposit_address, "5", "USDC", 6);
  await nodeA.test.mine({ blocks: 3 });
  await statusIs(pi.public_id, "confirmed");

  // Node B's branch parts at the payment's block and is longer: the node switches to it.
  await nodeB.test.mine({ blocks: 4 });
  proxy.retarget(nodeB.url);
  const reorged = await statusIs(pi.public_id, "pending");
  t.same([reorged.amount_received, reorged.transactions[0]?.counted, reorged.transactions[0]?.reason], ["0", false, "orphaned"], "the payment's block left the best chain");

  // Node A's branch grows longer than B's: the node switches back, the payment's block with it.
  await nodeA.test.mine({ blocks: 3 });
  proxy.retarget(nodeA.url);
  const back = await statusIs(pi.public_id, "confirmed");
  t.same([back.amount_received, back.transactions.length], ["5", 1], "counted again, listed once");
  t.equal(back.transactions[0]?.tx_hash, paid.hash);
  t.same(await eventsAtLeast(pi.public_id, 4), ["payment.confirmed", "payment.confirmed", "payment.intent.created", "payment.reorged"]);
});

t.test("a transaction paying two intents, re-mined after another log: each counted once, listed once; the chain goes on", async (t) => {
  const [x, y] = [await createIntent("3"), await createIntent("4")];
  const usdc = nodeA.tokens.USDC as Hex;
  const request = await nodeA.wallet.prepareTransactionRequest({
    account: nodeA.payer,
    chain: nodeA.wallet.chain,
    to: usdc,
    data: encodeFunctionData({ abi: tokenAbi, functionName: "transferBoth", args: [x.deposit_address, parseUnits("3", 6), y.deposit_address, parseUnits("4", 6)] }),
  });
  const raw = await nodeA.wallet.signTransaction({ ...request, account: nodeA.payer, chain: nodeA.wallet.chain } as Parameters<WalletClient["signTransaction"]>[0]);
  const hash = await nodeA.public.sendRawTransaction({ serializedTransaction: raw });
  await nodeA.test.mine({ blocks: 3 });
  await statusIs(x.public_id, "confirmed");
  await statusIs(y.public_id, "confirmed");
  const before = await nodeA.public.getTransactionReceipt({ hash });

  // The three blocks are replaced; the new first one holds another account's token log first, then the same transaction.
  const [, other] = (await nodeA.test.request({ method: "eth_accounts" as never })) as Hex[];
  const mint = { from: other, to: usdc, data: encodeFunctionData({ abi: tokenAbi, functionName: "mint", args: [other as Hex, 1n] }) };
  await nodeA.test.request({ method: "anvil_reorg" as never, params: [3, [[mint, 0], [raw, 0]]] as never });
  await nodeA.test.mine({ blocks: 3 });
  const after = await nodeA.public.getTransactionReceipt({ hash });
  t.not(after.blockHash, before.blockHash, "the transaction is in another block");
  t.not(after.logs[0]?.logIndex, before.logs[0]?.logIndex, "at other block-wide log positions");

  // A later payment on the chain: counted once the watcher got past the re-mined transaction.
  const z = await createIntent("1");
  await signPayment(nodeA, z.deposit_address, "1", "USDC", 6);
  await nodeA.test.mine({ blocks: 3 });
  await statusIs(z.public_id, "confirmed");
  for (const [pi, amount] of [[x, "3"], [y, "4"]] as const) {
    const now = await get(pi.public_id);
    t.same([now.status, now.amount_received, now.transactions.length], ["confirmed", amount, 1], `${pi.public_id}: counted once, listed once`);
    t.equal(now.transactions[0]?.tx_hash, hash);
  }
  await eventsAtLeast(z.public_id, 2);
  t.same(eventsOf(x.public_id), ["payment.confirmed", "payment.intent.created"], "x: no event for a payment that never stopped counting");
  t.same(eventsOf(y.public_id), ["payment.confirmed", "payment.intent.created"], "y: the same");
});
