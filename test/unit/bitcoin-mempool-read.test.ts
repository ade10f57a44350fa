// The bitcoin watcher's mempool reader against a fake node (no network): a node that says its
// mempool is not loaded is not read at all (asked before and after the txids); a payment whose
// input another transaction spends, seen in the mempool (a failover to a node that has the other
// spend) or in a block the follower read, is named conflicted once it left the mempool; one that
// left because it was mined, or merely vanished, is not.
import t from "tap";
import { findAsset, type AssetInfo } from "../../services/vocabulary/assets.ts";
import { parseBlock } from "../../services/watcher/bitcoin-bytes.ts";
import type { BitcoinNode } from "../../services/watcher/bitcoin-node.ts";
import { BitcoinMempool, BitcoinWatched } from "../../services/watcher/bitcoin-source.ts";
import { mine, txBytes, type FakeTx } from "../helpers/bitcoin-blocks.ts";

const payee = "BC1QW508D6QEJXTDG4Y5R3ZARVARY0C5XW7KV8F3T4";
const payeeScript = "0014751e76e8199196d454941c45d1b3a323f1433bd6";
const id = (n: number) => n.toString(16).padStart(64, "0");
const coin = (n: number) => ({ txid: id(0xc0000 + n), vout: 0, sequence: 0xffffffff });
/** Transaction n's txid, computed from its bytes. */
const made = new Map<number, string>();
const txid = (n: number) => made.get(n) as string;
/** Transaction n (its lock time n, so each n is its own): spends coin `spends`, pays the payee or someone else. */
const tx = (n: number, spends: number, paysPayee = true) => {
  const described: FakeTx = { vin: [coin(spends)], vout: [{ value: 0.001, scriptPubKey: { hex: paysPayee ? payeeScript : "0014" + "00".repeat(20) } }], lockTime: n };
  const bytes = txBytes(described);
  made.set(n, bytes.txid);
  return bytes;
};
type Tx = ReturnType<typeof tx>;
// The mempool reader looks at a block's transactions only (its header is the source's to check).
const block = (txs: Tx[]) => parseBlock(mine({ height: 101, time: 1_700_000_000, tx: [{ vout: [] }] }).hex.slice(0, 160) + txs.length.toString(16).padStart(2, "0") + txs.map((x) => x.hex).join(""), { height: 101, hash: id(0xb10c) });

/** A node whose mempool and `loaded` answers the test sets; `loadedAnswers` is consumed one per getmempoolinfo. */
function setup() {
  const state = { mempool: [] as Tx[], loadedAnswers: [] as boolean[], rawMempoolCalls: 0 };
  const node: BitcoinNode = {
    info: async () => ({ chain: "regtest", initialBlockDownload: false, chainwork: "02" }),
    headHeight: async () => 100,
    hashAt: async (h) => id(0xb000 + h),
    block: async () => undefined,
    header: async () => undefined,
    hashesAt: async (hs) => hs.map((h) => id(0xb000 + h)),
    rawHeaders: async (hs) => hs.map(() => undefined),
    async mempool() {
      state.rawMempoolCalls++;
      return state.mempool.map((x) => x.txid);
    },
    mempoolLoaded: async () => state.loadedAnswers.shift() ?? true,
    transaction: async (txid) => state.mempool.find((x) => x.txid === txid)?.hex,
  };
  const watched = new BitcoinWatched();
  watched.add(payee);
  return { state, mempool: new BitcoinMempool(node, findAsset("bitcoin", "BTC") as AssetInfo, watched) };
}

t.test("a node whose mempool is not loaded is not read", async (t) => {
  const { state, mempool } = setup();
  state.mempool = [tx(1, 1)];
  state.loadedAnswers = [false];
  t.equal(await mempool.read(), undefined, "not loaded: no snapshot");
  t.equal(state.rawMempoolCalls, 0, "and getrawmempool not even asked");
  state.loadedAnswers = [true, false];
  t.equal(await mempool.read(), undefined, "loaded before getrawmempool, not after (restarted in between): no snapshot");
  const read = await mempool.read();
  t.same(read?.outputs.map((o) => o.txHash), [txid(1)], "loaded: read");
});

t.test("a payment spent again in the mempool of another node (a failover) is conflicted", async (t) => {
  const { state, mempool } = setup();
  state.mempool = [tx(1, 1), tx(2, 2)];
  t.same((await mempool.read())?.conflicted, []);
  // The other node has a transaction spending payment 1's coin to someone else, and not payment 1.
  state.mempool = [tx(9, 1, false), tx(2, 2)];
  const read = await mempool.read();
  t.same(read?.conflicted, [txid(1)], "payment 1 is conflicted");
  t.same(read?.outputs.map((o) => o.txHash), [txid(2)], "payment 2 is still there");
  // Back on a node that has payment 1: in the mempool, so not conflicted.
  state.mempool = [tx(1, 1), tx(2, 2)];
  t.same((await mempool.read())?.conflicted, [], "in the mempool again: not conflicted");
});

t.test("a payment whose coin a block spends is conflicted; one mined, or merely gone, is not", async (t) => {
  const { state, mempool } = setup();
  state.mempool = [tx(1, 1), tx(2, 2), tx(3, 3)];
  await mempool.read();
  // A block mines payment 2 and spends payment 1's coin in another transaction; payment 3 just vanishes (evicted, or another node).
  mempool.sawBlocks([block([tx(2, 2), tx(8, 1, false)])]);
  state.mempool = [];
  t.same((await mempool.read())?.conflicted, [txid(1)], "only payment 1");
  // A block read after the payment left the mempool names it too.
  state.mempool = [tx(4, 4)];
  await mempool.read();
  state.mempool = [];
  t.same((await mempool.read())?.conflicted, [txid(1)], "payment 4 left, nothing spent its coin yet");
  mempool.sawBlocks([block([tx(7, 4, false)])]);
  t.same((await mempool.read())?.conflicted, [txid(1), txid(4)].sort(), "then a block spends it: conflicted");
});

t.test("a mempool transaction is read from its bytes: bytes that hash to another txid are refused, the JSON is never asked", async (t) => {
  const { state, mempool } = setup();
  const real = tx(30, 30);
  // The node names the real txid and serves another transaction's bytes (one paying the payee more).
  const other = txBytes({ vin: [coin(30)], vout: [{ value: 5, scriptPubKey: { hex: payeeScript } }], lockTime: 30 });
  state.mempool = [{ ...real, hex: other.hex }];
  await t.rejects(mempool.read(), { message: new RegExp(`getrawtransaction ${real.txid}: the node answered a transaction whose bytes hash to ${other.txid}`) });
  state.mempool = [real];
  t.same((await mempool.read())?.outputs.map((o) => [o.txHash, o.amount]), [[real.txid, "0.001"]], "the real bytes: read, the amount theirs");
});
