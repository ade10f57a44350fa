// The EVM watcher against a node that serves big blocks: anvil behind a JSON-RPC proxy that adds
// a thousand ~1.4 KB filler transactions to every block read with its transactions (as mainnet and
// Polygon blocks are), so that 20 blocks no longer fit in one response (the cap on a node's
// answer, WATCHER_MAX_RESPONSE_BYTES, set here to 10 MiB). A backlog of them is read in parts and the payments inside it count; a block too big
// for any read is named, retried, never skipped, and read once it fits.
import t from "tap";
import type { Hex } from "viem";
import { signPayment, startDevChain } from "../../scripts/devchain/chain.ts";
import { evmNode } from "../../services/watcher/evm-node.ts";
import { evmSource, EvmWatched } from "../../services/watcher/evm-source.ts";
import { chainAssetsIn } from "../../services/vocabulary/assets.ts";
import { call, idemKey, merchantWithKey, startTestApp, until } from "../helpers/harness.ts";
import { startRpcProxy } from "../helpers/rpc-proxy.ts";

const dev = await startDevChain();
t.teardown(() => dev.stop());
const proxy = await startRpcProxy(t, dev.url);
const cap = 10 * 1024 * 1024;
const s = await startTestApp(t, { ETHEREUM_TEST_RPC_URL: proxy.url, ETHEREUM_CONFIRMATIONS: "3", WATCHER_POLL_MS: "100", WATCHER_MAX_RESPONSE_BYTES: String(cap) });
const a = await merchantWithKey(s.app);
const intentsPath = `/api/v1/merchants/${a.merchant}/payment-intents`;

async function createIntent(asset: string, amount: string) {
  const res = await call(s.base, "POST", intentsPath, { key: a.key, idempotencyKey: idemKey(), body: { network: "ethereum", asset, requested_amount: amount } });
  if (res.status !== 200) throw new Error(`create: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data as { public_id: string; deposit_address: Hex; asset: string };
}
const get = async (id: string) => (await call(s.base, "GET", `${intentsPath}/${id}`, { key: a.key })).body.data;
const pay = (pi: { deposit_address: Hex; asset: string }, amount: string) => signPayment(dev, pi.deposit_address, amount, pi.asset, pi.asset === "ETH" ? 18 : 6);
const head = async () => Number(await dev.public.getBlockNumber({ cacheTime: 0 }));
/** The height the watcher saved as processed. */
const processed = async () =>
  Number((await s.app.db.em.fork().execute<{ height: string }[]>(`select height from chain_watchers where network = 'ethereum' and environment = 'test'`))[0]?.height ?? -1);
const rpcErrors = async () => {
  const metrics = await (await fetch(`http://127.0.0.1:${s.app.ports.ops}/metrics`)).text();
  return Number(/chain_rpc_errors_total\{network="ethereum",environment="test"\} (\d+)/.exec(metrics)?.[1] ?? 0);
};
const where = async () => `processed ${await processed()}, head ${await head()}, block reads ${proxy.calls.get("eth_getBlockByNumber") ?? 0}`;
let described = "";
const describe = () => described;
/** Keeps `described` fresh for a failed wait's message (the describe callback is synchronous). */
async function caughtUp() {
  await until("the watcher at the head", async () => {
    described = await where();
    return (await processed()) >= (await head());
  }, 60_000, describe);
}

t.test("a backlog of blocks of 1,000 transactions is read in parts; the payments inside it count", async (t) => {
  proxy.padTransactions = 1000;
  await caughtUp();
  const eth = await createIntent("ETH", "0.25");
  const usdc = await createIntent("USDC", "12.5");
  // A backlog of 45 blocks while the watcher cannot reach its node, the payments in the 21st.
  await proxy.down();
  await dev.test.mine({ blocks: 20 });
  const ethTx = await pay(eth, "0.25");
  const usdcTx = await pay(usdc, "12.5");
  await dev.test.mine({ blocks: 25 });
  const top = await head();
  const reads = proxy.calls.get("eth_getBlockByNumber") ?? 0;
  await proxy.up();
  const both = await until("both intents confirmed", async () => {
    described = await where();
    const [e, u] = [await get(eth.public_id), await get(usdc.public_id)];
    return e.status === "confirmed" && u.status === "confirmed" ? [e, u] : undefined;
  }, 120_000, describe);
  t.same(both.map((pi) => [pi.amount_received, pi.transactions.map((x: { tx_hash: string }) => x.tx_hash)]), [["0.25", [ethTx.hash]], ["12.5", [usdcTx.hash]]]);
  await caughtUp();
  t.ok((await processed()) >= top, "the watcher processed the whole backlog");
  t.ok((proxy.calls.get("eth_getBlockByNumber") ?? 0) - reads >= 45, "every block of it read through the proxy, padded");
});

t.test("a block too big for any read is named, retried, never skipped, and read once it fits", async (t) => {
  await caughtUp();
  // About 16 MB of transactions: more than one response may carry (the cap, 10 MiB).
  proxy.padTransactions = 12_000;
  const pi = await createIntent("USDC", "3");
  const { hash } = await pay(pi, "3");
  await dev.test.mine({ blocks: 1 });
  const big = await head();

  // What the watcher's error says (its log line): the block, by height, and why.
  const node = evmNode(proxy.url, undefined, cap);
  const source = evmSource(node, chainAssetsIn("ethereum", "test"), new EvmWatched());
  await t.rejects(source.read(big, big), { message: new RegExp(`^block ${big} could not be read: HTTP response body exceeded the size limit`) });
  await node.close();

  // The watcher retries with backoff and stays below the block: nothing after it is processed.
  const errors = await rpcErrors();
  await until("the watcher retried the block", async () => (await rpcErrors()) >= errors + 2, 60_000);
  await dev.test.mine({ blocks: 1 });
  await until("the watcher retried the block again", async () => (await rpcErrors()) >= errors + 3, 60_000);
  t.equal(await processed(), big - 1, "the watcher stays below the block it cannot read");
  t.same((await get(pi.public_id)).transactions, [], "nothing of it recorded");

  proxy.padTransactions = 1000;
  await dev.test.mine({ blocks: 2 });
  const now = await until("counted once the block can be read", async () => {
    described = await where();
    const x = await get(pi.public_id);
    return x.status === "confirmed" ? x : undefined;
  }, 90_000, describe);
  t.same(now.transactions.map((x: { tx_hash: string }) => x.tx_hash), [hash]);
  await caughtUp();
});
