// The follower against a chain held in memory, reporting to a core that links blocks as the real
// one does: a node that is behind has nothing new to tell; a real fork is reported as the other
// branch from where they part; a node that no longer serves the chain (confirmFork throws)
// reports nothing more.
import t from "tap";
import { link } from "../../services/chains/linkage.ts";
import { keptChain } from "../helpers/kept-chain.ts";
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

/** A core that keeps the chain as the real one links it (chains/linkage.ts, side branches and all), in memory. */
function recordingCore(maxDepth = 128) {
  const kept = keptChain();
  const left: string[][] = [];
  const outputs: { tx: string; block: string }[] = [];
  const heartbeats: number[] = [];
  const tips: number[] = [];
  const halts: number[] = [];
  /** Whether each halt's depth was a lower bound (the follower did not find where the branches part). */
  const atLeast: boolean[] = [];
  /** The pages of the core's kept chain the follower asked for: below which height, and how many blocks it got. */
  const pages: { before: number; got: number }[] = [];
  const bestBefore = async (before: number, count: number) => {
    const page = kept.bestBefore(before, count);
    pages.push({ before, got: page.length });
    return page;
  };
  const core: Core = {
    async report(blocks, head, o) {
      if (blocks.length === 0) {
        heartbeats.push(head.height);
        return;
      }
      const linkage = link(blocks, { ...kept.view(blocks, maxDepth), forkPointUnknown: o?.forkPointUnknown === true, toNodeHead: blocks.at(-1)?.height === head.height });
      if (linkage.kind === "halt") {
        halts.push(linkage.depth);
        atLeast.push(linkage.atLeast);
        throw new Error(`halt: ${linkage.reason}`);
      }
      if (linkage.kind !== "apply" && linkage.kind !== "side") throw new Error(`${linkage.kind}: ${linkage.reason}`);
      kept.apply(linkage);
      if (linkage.kind === "apply" && linkage.leave.length > 0) left.push(linkage.leave);
      tips.push(kept.tip()?.height ?? -1);
      for (const b of blocks) for (const o of b.outputs) outputs.push({ tx: o.txHash, block: b.hash });
    },
  };
  return { core, bestBefore, pages, left, outputs, heartbeats, tips, halts, atLeast, kept, tip: () => kept.tip() && { height: kept.tip()?.height, hash: kept.tip()?.hash } };
}

async function followToHead(f: Follower, head: number) {
  while (await f.step(head));
}

t.test("a node behind the reported height: nothing read or reported, and following goes on once it catches up", async (t) => {
  const chain = memoryChain(20);
  const { core, bestBefore, left, outputs, tip } = recordingCore();
  chain.pay(15, "0xpaid");
  const f = new Follower({ source: chain.source, core, bestBefore, keep: 22 }, { height: 10, recentBlocks: [] });
  await followToHead(f, chain.head());
  t.equal(f.position.height, 19);
  t.same(outputs, [{ tx: "0xpaid", block: "a-15" }], "the payment reported once, with its block");
  chain.state.behind = 3;
  t.equal(await f.step(chain.head()), false, "nothing to do while the node is 3 blocks behind");
  t.equal(f.position.height, 19, "the position stays");
  t.same(left, [], "no block left the core's best chain");
  chain.state.behind = 0;
  chain.fork(20, 22, "a");
  await followToHead(f, chain.head());
  t.equal(f.position.height, 21);
  t.same(tip(), { height: 21, hash: "a-21" });
  t.same(left, []);
  t.equal(outputs.length, 1, "the payment is not reported again: the core derives its confirmations");
});

t.test("a real fork: the other branch is reported from where they part, and the core moves its best chain", async (t) => {
  const chain = memoryChain(20);
  const { core, bestBefore, left, tip } = recordingCore();
  let asked = 0;
  const f = new Follower({ source: chain.source, core, bestBefore, keep: 22, confirmFork: async () => void asked++ }, { height: 10, recentBlocks: [] });
  await followToHead(f, chain.head());
  chain.fork(18, 21, "b");
  await followToHead(f, chain.head());
  t.equal(asked, 1, "the node was asked to prove its chain before going back");
  t.same(left, [["a-18", "a-19"]], "the blocks left behind, as the core found them");
  t.same(tip(), { height: 20, hash: "b-20" });
  t.equal(f.position.recentBlocks.at(-1)?.hash, "b-20");
});

t.test("a reorg to a lower head: the blocks above where the branches part leave at once, not once the node's branch is as high", async (t) => {
  const chain = memoryChain(20);
  const { core, bestBefore, left, tip, tips } = recordingCore();
  chain.pay(17, "0xpaid");
  const f = new Follower({ source: chain.source, core, bestBefore, keep: 22 }, { height: 10, recentBlocks: [] });
  await followToHead(f, chain.head());
  t.same(tip(), { height: 19, hash: "a-19" });
  // The node takes another branch from block 16 on, two blocks high: its head is 17, below 19.
  chain.fork(16, 18, "b");
  t.equal(chain.head(), 17);
  await followToHead(f, chain.head());
  t.same(left, [["a-16", "a-17", "a-18", "a-19"]], "every block above the fork point left, the paid one too");
  t.same(tip(), { height: 17, hash: "b-17" }, "the core's tip is the node's lower head");
  t.equal(tips.at(-1), 17);
  t.equal(f.position.height, 17);
  chain.fork(18, 21, "b");
  await followToHead(f, chain.head());
  t.same(tip(), { height: 20, hash: "b-20" }, "and the branch is followed on from there");
  t.equal(left.length, 1, "nothing else left");
});

t.test("a node behind on the same chain, its head below the reported height: its block there is the one reported, nothing leaves", async (t) => {
  const chain = memoryChain(20);
  const { core, bestBefore, left, tip } = recordingCore();
  let hashes = 0;
  const source = { ...chain.source, hashAt: async (h: number) => (hashes++, chain.source.hashAt(h)) };
  const f = new Follower({ source, core, bestBefore, keep: 22 }, { height: 10, recentBlocks: [] });
  await followToHead(f, chain.head());
  chain.state.behind = 2;
  hashes = 0;
  t.equal(await f.lowerBranch(chain.head()), false, "not a lower branch");
  t.equal(await f.step(chain.head()), false, "nothing to do");
  t.ok(hashes <= 2, `one hash asked per check: ${hashes}`);
  t.same(left, []);
  t.same(tip(), { height: 19, hash: "a-19" });
  t.equal(f.position.height, 19);
});

t.test("a node that no longer serves the chain: nothing more reported", async (t) => {
  const chain = memoryChain(20);
  const { core, bestBefore, left, tip } = recordingCore();
  const f = new Follower(
    {
      source: chain.source,
      core,
      bestBefore,
      keep: 22,
      confirmFork: async () => {
        throw new Error("another chain");
      },
    },
    { height: 10, recentBlocks: [] },
  );
  await followToHead(f, chain.head());
  chain.fork(1, 25, "reset");
  await t.rejects(f.step(chain.head()), /another chain/);
  t.same(left, [], "no block left the core's best chain");
  t.same(tip(), { height: 19, hash: "a-19" });
  t.equal(f.position.height, 19);
});

t.test("a fork told in parts: the core's tip never goes down, and a block that stays on the best chain keeps it", async (t) => {
  const chain = memoryChain(100);
  const { core, bestBefore, left, tips } = recordingCore();
  const f = new Follower({ source: chain.source, core, bestBefore, keep: 272 }, { height: 10, recentBlocks: [] });
  await followToHead(f, chain.head());
  tips.length = 0;
  chain.fork(70, 100, "b");
  await followToHead(f, chain.head());
  t.ok(tips.length >= 6, "the 30 blocks of the other branch came in parts of 5");
  t.ok(tips.every((h) => h >= 99), `the core's tip stayed at 99 or above throughout (${tips.join(",")})`);
  t.same(left, [Array.from({ length: 30 }, (_, i) => `a-${70 + i}`)], "the old branch left once, when the new one was as high");
});

t.test("a fork deeper than the window the follower was given is found by halves; one deeper than the maximum stops at the core", async (t) => {
  const chain = memoryChain(400);
  const { core, bestBefore, left, halts } = recordingCore(100);
  const f = new Follower({ source: chain.source, core, bestBefore, keep: 216 }, { height: 10, recentBlocks: [] });
  await followToHead(f, chain.head());
  chain.fork(340, 401, "b");
  await followToHead(f, chain.head());
  t.same(left.map((l) => l.length), [60], "a 60-block fork within the maximum: followed");
  chain.fork(250, 402, "c");
  await t.rejects(followToHead(f, chain.head()), /halt/, "a fork taking 151 blocks away: refused");
  t.same(halts, [151], "with its depth: blocks 250 to 400 would leave");
  t.equal(left.length, 1, "nothing more left the best chain");
});

t.test("a fork below every block the follower and the core keep (a chain followed since a few blocks ago): the other branch is reported up to the head at once", async (t) => {
  const chain = memoryChain(100);
  const { core, bestBefore, left, halts, tips } = recordingCore(128);
  // Starts at block 79, as a new watcher does just below the head; reads 5 blocks a batch.
  const f = new Follower({ source: chain.source, core, bestBefore, keep: 272 }, { height: 79, recentBlocks: [] });
  await followToHead(f, chain.head());
  chain.fork(60, 100, "b");
  await followToHead(f, chain.head());
  t.same(halts, [], "not stopped");
  t.same(left.map((l) => l.length), [20], "every kept block left, once");
  t.same(tips.slice(-1), [99], "the tip never went down");
  t.equal(f.position.height, 99, "followed to the head");
});

t.test("a chain followed for the first time with the node's hashes below where it starts: a fork below the first block reported is told with its true depth", async (t) => {
  const seeded = () => ({ height: 89, recentBlocks: Array.from({ length: 31 }, (_, i) => ({ height: 59 + i, hash: `a-${59 + i}` })), unreported: 89 });
  const within = memoryChain(100);
  const a = recordingCore(30);
  const f = new Follower({ source: within.source, core: a.core, bestBefore: a.bestBefore, keep: 76 }, seeded());
  await followToHead(f, within.head());
  within.fork(80, 100, "b");
  await followToHead(f, within.head());
  t.same([a.halts, a.left.map((l) => l.length)], [[], [10]], "parting at block 79, 20 blocks deep: followed; the 10 blocks reported leave");

  const deeper = memoryChain(100);
  const b = recordingCore(30);
  const g = new Follower({ source: deeper.source, core: b.core, bestBefore: b.bestBefore, keep: 76 }, seeded());
  await followToHead(g, deeper.head());
  deeper.fork(65, 100, "b");
  await t.rejects(followToHead(g, deeper.head()), /halt/, "parting at block 64, 35 blocks deep: refused");
  t.same(b.halts, [35], "with its true depth, not the 10 blocks the core keeps");
  t.same(b.atLeast, [false], "exact: the branches were found to part at block 64");

  // Parting below every hash the follower read (59..89): it reports from 59, saying it did not find
  // where they part; the core counts 41 blocks (99 - 58) and says that is a lower bound.
  const below = memoryChain(100);
  const c = recordingCore(30);
  const h = new Follower({ source: below.source, core: c.core, bestBefore: c.bestBefore, keep: 76 }, seeded());
  await followToHead(h, below.head());
  below.fork(50, 100, "b");
  await t.rejects(followToHead(h, below.head()), /halt: a branch from block 58 or below takes at least 41 blocks off/, "parting at block 49, 50 blocks deep: refused");
  t.same([c.halts, c.atLeast], [[41], [true]], "with 41 as a lower bound: the branches part below what the follower knew");
});

t.test("a fork below every block the follower keeps of a chain followed for long: found in the core's kept chain, measured exactly; resumed, only the blocks above it leave", async (t) => {
  const chain = memoryChain(200);
  const { core, bestBefore, pages, halts, atLeast, left, kept, outputs } = recordingCore(30);
  chain.pay(50, "0xdeep");
  const f = new Follower({ source: chain.source, core, bestBefore, keep: 76 }, { height: 0, recentBlocks: [] });
  await followToHead(f, chain.head());
  chain.fork(100, 200, "b");
  chain.pay(102, "0xnew");
  await t.rejects(followToHead(f, chain.head()), /halt: a branch from block 99 takes 100 blocks off/, "a 100-block fork, deeper than the 76 blocks the follower keeps: refused");
  t.same([halts, atLeast], [[100], [false]], "100 blocks, exactly: the follower found block 99 in what the core keeps");
  t.same(pages, [{ before: 124, got: 123 }], "one page of the core's kept chain, below the oldest block the follower kept");
  t.same(left, [], "nothing left the best chain");

  // ops chain-resume: a new follower from the core's position (ClaimChain's 76 newest blocks) takes the fork.
  kept.resume();
  const g = new Follower({ source: chain.source, core, bestBefore, keep: 76 }, { height: 199, recentBlocks: kept.bestBefore(200, 76) });
  await g.resume();
  await followToHead(g, chain.head());
  t.same(left, [Array.from({ length: 100 }, (_, i) => `a-${100 + i}`)], "only the 100 blocks above the fork left, once");
  t.equal(kept.best().get(50), "a-50", "the deep payment's block stayed");
  t.equal(kept.best().get(99), "a-99", "and every block up to the fork point");
  t.equal(kept.tip()?.hash, "b-199", "the branch is best");
  t.ok(outputs.some((o) => o.tx === "0xnew" && o.block === "b-102"), "the branch was read from its first block: the payment in its third is reported");
  t.ok(g.position.recentBlocks.length <= 76, "the follower keeps no more than it did");
});

t.test("a fork pages deep: the follower walks down the core's kept chain a page at a time, holding no more than its window once it found where they part", async (t) => {
  const chain = memoryChain(1000);
  const { core, bestBefore, pages, halts, atLeast } = recordingCore(5);
  let asked = 0;
  // The node's hashes asked below the follower's window: the walk's.
  const source: ChainSource = { ...chain.source, hashAt: (h) => (h < 974 && asked++, chain.source.hashAt(h)) };
  let walk: { asked: number; orphaned: number } | undefined;
  const f = new Follower({ source, core, bestBefore, keep: 26, onReorg: (blocks) => (walk = { asked, orphaned: blocks.length }) }, { height: 0, recentBlocks: [] });
  await followToHead(f, chain.head());
  chain.fork(400, 1000, "b");
  asked = 0;
  await t.rejects(followToHead(f, chain.head()), /halt/, "a 600-block fork past a maximum of 5: refused");
  t.same([halts, atLeast], [[600], [false]], "600 blocks, exactly");
  t.same(
    pages,
    [
      { before: 974, got: 256 },
      { before: 718, got: 256 },
      { before: 462, got: 256 },
    ],
    "three pages of 256, going down until one held a block on the node's chain",
  );
  t.ok(walk && walk.asked < 20, `a dozen node calls to find where they part, not hundreds (${walk?.asked})`);
  t.equal(walk?.orphaned, 600, "the 600 blocks above it told as left the node's chain");
  t.ok(f.position.recentBlocks.length <= 26, "the follower keeps its window, not the pages");
});

t.test("a fork below every block the core keeps too: reported from the lowest block kept, as a lower bound; resumed, the kept chain starts over and the whole branch is read", async (t) => {
  const chain = memoryChain(100);
  const { core, bestBefore, pages, halts, atLeast, left, kept, outputs, tips } = recordingCore(5);
  // Followed from block 10: the core keeps 10..99, more than a batch and the window.
  const f = new Follower({ source: chain.source, core, bestBefore, keep: 26 }, { height: 9, recentBlocks: [] });
  await followToHead(f, chain.head());
  chain.fork(6, 100, "b");
  chain.pay(12, "0xnew");
  await t.rejects(followToHead(f, chain.head()), /halt: a branch from block 9 or below takes at least 90 blocks off/, "refused, counted from below the lowest block kept");
  t.same([halts, atLeast], [[90], [true]], "at least 90: every block the core keeps left the node's chain");
  t.same(pages, [{ before: 74, got: 64 }, { before: 10, got: 0 }], "the core's kept chain walked down to its lowest block");

  kept.resume();
  const g = new Follower({ source: chain.source, core, bestBefore, keep: 26 }, { height: 99, recentBlocks: kept.bestBefore(100, 26) });
  await g.resume();
  await followToHead(g, chain.head());
  t.same(left.map((l) => l.length), [90], "every kept block left, once");
  t.equal(kept.tip()?.hash, "b-99", "the branch is best, up to the head");
  t.ok(tips.every((h, i) => i === 0 || h >= (tips[i - 1] as number) || h < 99), "the tip went down once, with the restart, then up");
  t.ok(outputs.some((o) => o.tx === "0xnew" && o.block === "b-12"), "the branch was read from the lowest kept height: a payment in it is reported");
});

t.test("back from a node failure: the backlog is read 2 blocks first, then 4, then full batches; the payments reported once each", async (t) => {
  const chain = memoryChain(40);
  const { core, bestBefore, outputs, tips } = recordingCore();
  for (const h of [11, 12, 20, 35]) chain.pay(h, `0xpaid-${h}`);
  const f = new Follower({ source: chain.source, core, bestBefore, keep: 22 }, { height: 10, recentBlocks: [] });
  t.ok(await f.step(chain.head()));
  t.equal(f.position.height, 15, "a follower reads full batches (5 blocks here) until told otherwise");
  f.slowStart();
  await followToHead(f, chain.head());
  t.same(tips, [15, 17, 21, 26, 31, 36, 39], "2 blocks, then 4, then 5 a batch, up to the head");
  t.same(outputs.map((o) => o.tx), ["0xpaid-11", "0xpaid-12", "0xpaid-20", "0xpaid-35"], "each payment once, in order");
});

t.test("catching up, a batch read ahead that links to the block reported last stands for asking the node for that block's hash; the last step, with nothing read ahead, asks", async (t) => {
  const chain = memoryChain(40);
  const { core, bestBefore, outputs, tips } = recordingCore();
  for (const h of [12, 27]) chain.pay(h, `0xpaid-${h}`);
  const asked: number[] = [];
  const source: ChainSource = { ...chain.source, hashAt: async (h) => (asked.push(h), chain.source.hashAt(h)) };
  const f = new Follower({ source, core, bestBefore, keep: 22 }, { height: 10, recentBlocks: [] });
  await followToHead(f, chain.head());
  t.same(tips, [15, 20, 25, 30, 35, 39], "5 blocks a batch, up to the head");
  t.same(asked, [39], "one hash asked: the tip's, at the step that found nothing read ahead");
  t.same(outputs.map((o) => o.tx), ["0xpaid-12", "0xpaid-27"]);
});

t.test("catching up, the chain changed under a batch read ahead (a fork below the block reported last): the batch's parent checked, the node asked, the other branch reported", async (t) => {
  const chain = memoryChain(40);
  const kept = recordingCore();
  let forked = false;
  // The fork happens while the core records the batch up to 20: the batch 21-25 was read before it, from branch a.
  const core: Core = {
    async report(blocks, head, o) {
      await kept.core.report(blocks, head, o);
      if (!forked && blocks.at(-1)?.height === 20) {
        forked = true;
        chain.fork(18, 40, "b");
      }
    },
  };
  let confirmed = 0;
  const f = new Follower({ source: chain.source, core, bestBefore: kept.bestBefore, keep: 22, confirmFork: async () => void confirmed++ }, { height: 10, recentBlocks: [] });
  await followToHead(f, chain.head());
  t.same(kept.tip(), { height: 39, hash: "b-39" }, "the core's best chain is the node's");
  t.equal(confirmed, 1, "the node proved its chain once, before the follower went back");
  t.ok(kept.left.some((l) => l.includes("a-18") && l.includes("a-20")), "the blocks above where the branches part left the core's best chain");
  t.equal(f.position.recentBlocks.at(-1)?.hash, "b-39");
});

t.test("back from a node failure, while the batches still grow, the batch after the next is read too, while the core records the one before", async (t) => {
  const chain = memoryChain(40);
  const kept = recordingCore();
  for (const h of [16, 22, 38]) chain.pay(h, `0xpaid-${h}`);
  const asked: string[] = [];
  const source: ChainSource = { ...chain.source, read: async (from, to) => (asked.push(`${from}-${to}`), chain.source.read(from, to)) };
  // What had been asked for while the core recorded each batch (it takes a few turns of the event loop).
  const during = new Map<string, string[]>();
  const core: Core = {
    async report(blocks, head, o) {
      for (let i = 0; i < 3; i++) await new Promise((resolve) => setImmediate(resolve));
      during.set(`${blocks[0]?.height}-${blocks.at(-1)?.height}`, [...asked]);
      await kept.core.report(blocks, head, o);
    },
  };
  const f = new Follower({ source, core, bestBefore: kept.bestBefore, keep: 22 }, { height: 10, recentBlocks: [] });
  t.ok(await f.step(chain.head()));
  f.slowStart();
  await followToHead(f, chain.head());
  t.same(kept.tips, [15, 17, 21, 26, 31, 36, 39], "2 blocks, then 4, then 5 a batch, up to the head, as before");
  t.same(during.get("16-17")?.slice(-2), ["18-21", "22-26"], "while the core recorded the first 2 blocks, the 4 after them and the full batch after those were read");
  t.same(during.get("22-26")?.slice(-1), ["27-31"], "full batches: one read ahead");
  t.same(asked, ["11-15", "16-20", "16-17", "18-21", "22-26", "27-31", "32-36", "37-39"], "each batch read once, in order (16-20 was read ahead before the slow start, and dropped)");
  t.same(kept.outputs.map((o) => o.tx), ["0xpaid-16", "0xpaid-22", "0xpaid-38"]);
});
