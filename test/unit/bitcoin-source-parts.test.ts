// The Bitcoin source's reads in parts, against a fake node (no network): a read of several blocks
// that fails (a timeout, the node's work queue full) is tried again with fewer blocks at a time,
// down to one, and a block that cannot be read on its own is named; the caller backs off and
// retries it, nothing is skipped.
import t from "tap";
import { findAsset, type AssetInfo } from "../../services/vocabulary/assets.ts";
import type { BitcoinNode } from "../../services/watcher/bitcoin-node.ts";
import { bitcoinSource, BitcoinWatched } from "../../services/watcher/bitcoin-source.ts";
import { BlockReadError } from "../../services/watcher/read-parts.ts";
import { mine, type MinedBlock } from "../helpers/bitcoin-blocks.ts";

const payee = "BC1QW508D6QEJXTDG4Y5R3ZARVARY0C5XW7KV8F3T4";
const payeeScript = "0014751e76e8199196d454941c45d1b3a323f1433bd6";
const txidOf = (n: number) => n.toString(16).padStart(64, "0");

/** A node whose getblock fails when more than `inFlight` run at once (bitcoind's -rpcworkqueue), and for the heights in `broken` always. */
function fakeNode(o: { head: number; inFlight?: number; broken?: number[]; paid?: number[] }) {
  // The chain, mined so that every block passes the source's checks (regtest's target).
  const chain: MinedBlock[] = [];
  for (let h = 0; h <= o.head; h++) {
    chain.push(mine({
      height: h,
      previousblockhash: chain[h - 1]?.hash,
      time: 1_700_000_000 + h * 600,
      tx: [{ tag: h + 0xabc, vout: [{ value: 0.5, scriptPubKey: { hex: "0014" + "00".repeat(20) } }, ...(o.paid?.includes(h) ? [{ value: 0.001, scriptPubKey: { hex: payeeScript } }] : [])] }],
    }));
  }
  const hashOf = (h: number) => (chain[h] as MinedBlock).hash;
  let running = 0;
  const calls: number[][] = [];
  let wave: number[] = [];
  const node: Pick<BitcoinNode, "headHeight" | "hashAt" | "block" | "header"> = {
    header: async () => undefined,
    headHeight: async () => o.head,
    hashAt: async (h) => (h > o.head ? undefined : hashOf(h)),
    async block(hash) {
      const h = chain.findIndex((b) => b.hash === hash);
      if (running === 0) calls.push((wave = []));
      wave.push(h);
      running++;
      try {
        await new Promise((r) => setImmediate(r));
        if (o.broken?.includes(h)) throw new DOMException("The operation was aborted due to timeout", "TimeoutError");
        if (running > (o.inFlight ?? Infinity)) throw new Error("getblock: the node answered HTTP 503 with no JSON-RPC body");
        return (chain[h] as MinedBlock).hex;
      } finally {
        running--;
      }
    },
  };
  return { node: node as BitcoinNode, calls };
}

function source(node: BitcoinNode) {
  const watched = new BitcoinWatched();
  watched.add(payee);
  return bitcoinSource(node, findAsset("bitcoin", "BTC") as AssetInfo, watched, { rules: "test" });
}

t.test("the node refuses 4 blocks at once: read with fewer at a time, every block in order with its outputs", async (t) => {
  const f = fakeNode({ head: 100, inFlight: 1, paid: [3] });
  const read = await source(f.node).read(1, 4);
  t.same(read?.blocks.map((b) => b.height), [1, 2, 3, 4]);
  t.same(read?.outputs.map((o) => [o.blockHeight, o.amount, o.outputIndex, o.toAddress]), [[3, "0.001", 1, payee]]);
  t.same(f.calls.map((c) => c.length), [4, 2, 1, 1, 1, 1], "4 failed, then 2, then one at a time");
});

t.test("a block that cannot be read on its own is named, with the node's reason", async (t) => {
  const f = fakeNode({ head: 100, broken: [3] });
  const err = await source(f.node).read(1, 4).then(() => undefined, (e: unknown) => e);
  t.type(err, BlockReadError);
  t.equal((err as Error).message, "block 3 could not be read: The operation was aborted due to timeout");
  t.same(f.calls, [[1, 2, 3, 4], [1, 2], [3, 4], [3]], "in halves, down to the block alone, and no further");
  await t.rejects(source(f.node).read(3, 3), { message: /^block 3 could not be read: / }, "alone too (following the head)");
});

t.test("past the head: undefined, as before", async (t) => {
  t.equal(await source(fakeNode({ head: 2 }).node).read(1, 4), undefined);
});
