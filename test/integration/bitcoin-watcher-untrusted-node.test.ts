// The Bitcoin watcher never trusts its node either: bcoin on regtest (Bitcoin Core's RPC through
// the compat relay) behind a JSON-RPC proxy of ours. A node that names mainnet or is in its
// initial block download while followed is not read until it proves itself again; a node two
// blocks behind un-counts nothing; an answer over WATCHER_MAX_RESPONSE_BYTES (1 MiB here) fails
// its read without the process holding it. Checked through the REST API, /metrics and signed webhooks.
import v8 from "node:v8";
import vm from "node:vm";
import t from "tap";
import { bitcoinNode, ResponseTooLargeError } from "../../services/watcher/bitcoin-node.ts";
import { startRegtest } from "../helpers/bitcoin-regtest.ts";
import { call, idemKey, until } from "../helpers/harness.ts";
import { startRpcProxy } from "../helpers/rpc-proxy.ts";
import { signedEvents, webhookSetup } from "../helpers/webhooks.ts";

const cap = 1024 * 1024;
const chain = await startRegtest();
t.teardown(() => chain.stop());
const relay = new URL(chain.url);
const node = await startRpcProxy(t, `http://${relay.host}/`, { bitcoin: true });
const watcherUrl = `http://${relay.username}:${relay.password}@127.0.0.1:${node.port}`;
const s = await webhookSetup(t, { env: { BITCOIN_TEST_RPC_URL: watcherUrl, WATCHER_POLL_MS: "100", WATCHER_NODE_PROOF_SECONDS: "1", WATCHER_MAX_RESPONSE_BYTES: String(cap) } });
const { base, creds: a } = s;
const endpoint = await s.createEndpoint();
const path = `/api/v1/merchants/${a.merchant}/payment-intents`;

async function createIntent(amount: string) {
  const res = await call(base, "POST", path, { key: a.key, idempotencyKey: idemKey(), body: { network: "bitcoin", asset: "BTC", requested_amount: amount } });
  if (res.status !== 200) throw new Error(`create: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data as { public_id: string; deposit_address: string };
}
const get = async (id: string) => (await call(base, "GET", `${path}/${id}`, { key: a.key })).body.data;
const pay = (pi: { deposit_address: string }, btc: string) => chain.pay([{ address: pi.deposit_address, btc }]);
const gauge = async (name: string) => {
  const text = await (await fetch(`http://127.0.0.1:${s.app.ports.ops}/metrics`)).text();
  const m = new RegExp(`^${name}\\{network="bitcoin",environment="test"\\} (\\S+)$`, "m").exec(text);
  return m ? Number(m[1]) : undefined;
};
const statusIs = (id: string, status: string) => until(`${id} ${status}`, async () => ((await get(id)).status === status ? true : undefined), 30_000, () => status);
const eventsOf = (id: string) => signedEvents(s.receiver, endpoint.secret).filter((e) => e.data.payment_intent?.public_id === id).map((e) => e.type);

await until("the Test chain followed", async () => (await gauge("chain_watcher_active")) === 1, 30_000);

t.test("a node that names mainnet, or is in its initial block download, is not read until it proves itself again", async (t) => {
  for (const [what, misbehave, behave] of [
    ["names bitcoin mainnet", () => (node.chainName = "main"), () => (node.chainName = undefined)],
    ["is in its initial block download", () => (node.syncing = true), () => (node.syncing = false)],
  ] as const) {
    misbehave();
    await until(`refused once it ${what}`, async () => (await gauge("chain_node_refused")) === 1, 30_000);
    const pi = await createIntent("0.001");
    const { txid } = await pay(pi, "0.001");
    await chain.mine(2);
    const reads = node.calls.get("getblock") ?? 0;
    const proofs = node.calls.get("getblockchaininfo") ?? 0;
    await until("asked again", async () => (node.calls.get("getblockchaininfo") ?? 0) >= proofs + 2, 30_000);
    t.equal(node.calls.get("getblock") ?? 0, reads, `${what}: no block read from it`);
    t.same((await get(pi.public_id)).transactions, [], `${what}: nothing recorded`);
    behave();
    await statusIs(pi.public_id, "confirmed");
    t.equal((await get(pi.public_id)).transactions[0].tx_hash, txid);
    t.equal(await gauge("chain_node_refused"), 0, `${what}: followed again`);
  }
});

t.test("a node two blocks behind for a while un-counts nothing", async (t) => {
  const pi = await createIntent("0.002");
  await pay(pi, "0.002");
  await chain.mine(2);
  await statusIs(pi.public_id, "confirmed");
  const head = await chain.height();
  await until("the head processed", async () => (await gauge("chain_processed_height")) === head, 30_000);
  node.behind = 2;
  const polls = node.calls.get("getblockcount") ?? 0;
  await until("twenty polls of the behind node", async () => (node.calls.get("getblockcount") ?? 0) >= polls + 20, 30_000);
  t.equal(await gauge("chain_node_behind_blocks"), 2);
  node.behind = 0;
  const sentinel = await createIntent("0.0005");
  await pay(sentinel, "0.0005");
  await chain.mine(2);
  await statusIs(sentinel.public_id, "confirmed");
  await until("the sentinel's webhook", async () => eventsOf(sentinel.public_id).includes("payment.confirmed"), 30_000);
  const now = await get(pi.public_id);
  t.equal(now.status, "confirmed");
  t.equal(now.transactions[0].counted, true);
  t.same(eventsOf(pi.public_id).sort(), ["payment.confirmed", "payment.intent.created"], "no payment.reorged");
});

t.test("an answer over the cap fails its read; the process never holds it", async (t) => {
  const counter = async () => Number(/^chain_rpc_errors_total\{network="bitcoin",environment="test"\} (\d+)$/m.exec(await (await fetch(`http://127.0.0.1:${s.app.ports.ops}/metrics`)).text())?.[1] ?? 0);
  const pi = await createIntent("0.0007");
  await pay(pi, "0.0007");
  await chain.mine(2);
  await statusIs(pi.public_id, "confirmed");
  const answer = 100 * 1024 * 1024;
  // The heap and the buffers outside it, sampled while the watcher reads: the answer is 100 times
  // the cap. Garbage collected first, so that the baseline is what is live.
  v8.setFlagsFromString("--expose-gc");
  (vm.runInNewContext("gc") as () => void)();
  const used = () => { const m = process.memoryUsage(); return m.heapUsed + m.arrayBuffers; };
  const before = used();
  let peak = before;
  const sampler = setInterval(() => (peak = Math.max(peak, used())), 5);
  t.teardown(() => clearInterval(sampler));
  const errors = await counter();
  const reads = node.calls.get("getrawmempool") ?? 0;
  node.oversize = { method: "getrawmempool", bytes: answer };
  try {
    // The same read as the watcher's, named: it fails for its size, having read no more than the cap.
    await t.rejects(bitcoinNode(watcherUrl, 20_000, cap).mempool(), ResponseTooLargeError, "a getrawmempool over the cap fails");
    await t.rejects(bitcoinNode(watcherUrl, 20_000, cap).mempool(), { message: `getrawmempool: the node's answer is over ${cap} bytes (WATCHER_MAX_RESPONSE_BYTES); it was not read further` });
    const failed = await until("the watcher's reads of the mempool fail", async () => ((await counter()) >= errors + 2 && (node.calls.get("getrawmempool") ?? 0) >= reads + 4 ? true : undefined), 30_000).catch(() => false);
    t.ok(failed, "the watcher's own reads fail as the node's (chain_rpc_errors_total), and it reads again");
  } finally {
    node.oversize = undefined;
    clearInterval(sampler);
  }
  const grown = peak - before;
  t.ok(grown < answer / 2, `the process grew by ${(grown / 1024 / 1024).toFixed(1)} MiB while answers of ${answer / 1024 / 1024} MiB came (cap ${cap / 1024 / 1024} MiB)`);

  // The node answers within the cap again: the watcher goes on.
  const after = await createIntent("0.0008");
  await pay(after, "0.0008");
  await chain.mine(2);
  await statusIs(after.public_id, "confirmed");
});
