// The follower against a chain held in memory: a node that is behind has nothing new to tell
// and un-counts nothing; a real fork orphans the blocks that left; a node that no longer serves
// the chain (confirmFork throws) orphans nothing.
import t from "tap";
import { Follower, type ChainSource, type Core, type Output, type SourceBlock } from "../../services/watcher/follow.ts";

/** A chain of blocks by height (hash `<branch>-<height>`), served as if `behind` blocks lower. */
function memoryChain(length: number, branch = "a") {
  const blocks: SourceBlock[] = [];
  const outputs = new Map<number, Output[]>();
  const extend = (to: number, b: string) => {
    for (let h = blocks.length; h <= to; h++) {
      const parent = h === 0 ? "" : (blocks[h - 1] as SourceBlock).hash;
      blocks.push({ height: h, hash: `${b}-${h}`, parentHash: parent, time: 1000 + h });
    }
  };
  extend(length - 1, branch);
  const state = { behind: 0 };
  const head = () => blocks.length - 1 - state.behind;
  const source: ChainSource = {
    batchBlocks: 5,
    headHeight: async () => head(),
    hashAt: async (h) => (h <= head() ? blocks[h]?.hash : undefined),
    async read(from, to) {
      if (to > head()) return undefined;
      const bs = blocks.slice(from, to + 1);
      return { blocks: bs, outputs: bs.flatMap((b) => outputs.get(b.height)?.filter((o) => o.blockHash === b.hash) ?? []) };
    },
  };
  return {
    source,
    state,
    head,
    pay(height: number, txHash: string) {
      const b = blocks[height] as SourceBlock;
      const o: Output = { asset: "USDC", toAddress: "0xabc", txHash, outputIndex: 1, amount: "1", blockHeight: height, blockHash: b.hash, blockTime: b.time };
      outputs.set(height, [...(outputs.get(height) ?? []), o]);
    },
    /** Replaces blocks from `height` up with another branch, `length` blocks long in all. */
    fork(height: number, newLength: number, b: string) {
      blocks.splice(height);
      extend(newLength - 1, b);
    },
  };
}

function recordingCore() {
  const reorgs: string[][] = [];
  const records: { tx: string; confirmations: number }[] = [];
  const core: Core = {
    async record(o, confirmations) {
      records.push({ tx: o.txHash, confirmations });
      return 3;
    },
    async reorg(hashes) {
      reorgs.push([...hashes]);
    },
    async save() {},
  };
  return { core, reorgs, records };
}

async function followToHead(f: Follower, head: number) {
  while (await f.step(head));
}

t.test("a node behind the processed height: nothing orphaned, nothing read, and following goes on once it catches up", async (t) => {
  const chain = memoryChain(20);
  const { core, reorgs, records } = recordingCore();
  chain.pay(15, "0xpaid");
  const f = new Follower({ source: chain.source, core, required: { USDC: 3 } }, { height: 10, recentBlocks: [] });
  await followToHead(f, chain.head());
  t.equal(f.position.height, 19);
  t.same(records.at(-1), { tx: "0xpaid", confirmations: 5 });
  chain.state.behind = 3;
  t.equal(await f.step(chain.head()), false, "nothing to do while the node is 3 blocks behind");
  t.equal(f.position.height, 19, "the position stays");
  t.same(reorgs, [], "no block reported orphaned");
  chain.state.behind = 0;
  chain.fork(20, 22, "a");
  await followToHead(f, chain.head());
  t.equal(f.position.height, 21);
  t.same(reorgs, []);
});

t.test("a real fork orphans the blocks that left the best chain, once confirmFork agrees", async (t) => {
  const chain = memoryChain(20);
  const { core, reorgs } = recordingCore();
  let asked = 0;
  const f = new Follower({ source: chain.source, core, required: { USDC: 3 }, confirmFork: async () => void asked++ }, { height: 10, recentBlocks: [] });
  await followToHead(f, chain.head());
  chain.fork(18, 21, "b");
  await followToHead(f, chain.head());
  t.equal(asked, 1, "the node was asked to prove its chain before anything was orphaned");
  t.same(reorgs, [["a-19", "a-18"]]);
  t.equal(f.position.recentBlocks.at(-1)?.hash, "b-20");
});

t.test("a node that no longer serves the chain orphans nothing", async (t) => {
  const chain = memoryChain(20);
  const { core, reorgs } = recordingCore();
  const f = new Follower(
    {
      source: chain.source,
      core,
      required: { USDC: 3 },
      confirmFork: async () => {
        throw new Error("another chain");
      },
    },
    { height: 10, recentBlocks: [] },
  );
  await followToHead(f, chain.head());
  chain.fork(1, 25, "reset");
  await t.rejects(f.step(chain.head()), /another chain/);
  t.same(reorgs, [], "no reorg reported for a chain that was replaced");
  t.equal(f.position.height, 19);
});
