// How the core links a reported batch of blocks to the chain it keeps: a repeated block changes
// nothing, a branch becomes best only once it beats the best chain (by height, or by chainwork on
// bitcoin) and is kept beside it until then, a fork deeper than the network's maximum stops the
// chain, and a batch that links to nothing is refused.
import t from "tap";
import { admit, link, type ChainView, type KeptBlock, type LinkBlock } from "../../services/chains/linkage.ts";
import { blocksTaken } from "../../services/vocabulary/assets.ts";
import { keptChain } from "../helpers/kept-chain.ts";

/** Blocks `from..to` of branch `b` (hash `<b>-<height>`), the first one's parent on branch `parent`. */
function blocks(from: number, to: number, b: string, parent = b): LinkBlock[] {
  const out: LinkBlock[] = [];
  for (let h = from; h <= to; h++) out.push({ height: h, hash: `${b}-${h}`, parentHash: h === from ? `${parent}-${h - 1}` : `${b}-${h - 1}` });
  return out;
}
const chain = (from: number, to: number, b = "a") => new Map(blocks(from, to, b).map((x) => [x.height, x.hash]));
const tipOf = (m: Map<number, string>): KeptBlock => {
  const h = Math.max(...m.keys());
  return { height: h, hash: m.get(h) as string };
};
/** The core's view of a best chain `best` with no side branch: the batch's parent is on it. */
const onBest = (best: Map<number, string>, o: Partial<ChainView> = {}): ChainView => ({ tip: tipOf(best), best, sideBelow: [], maxDepth: 100, acceptDeeper: false, ...o });
const apply = (append: LinkBlock[], leave: string[], tip: KeptBlock, rejoin: string[] = []) => ({ kind: "apply", append, rejoin, leave, tip, restart: false });

t.test("the first batch starts the chain; the next one extends its tip", async (t) => {
  const first = link(blocks(5, 7, "a"), { tip: undefined, best: new Map(), sideBelow: [], maxDepth: 100, acceptDeeper: false });
  t.same(first, apply(blocks(5, 7, "a"), [], { height: 7, hash: "a-7" }));
  const best = chain(5, 7);
  t.same(link(blocks(8, 9, "a"), onBest(best)), apply(blocks(8, 9, "a"), [], { height: 9, hash: "a-9" }));
});

t.test("blocks reported again change nothing", async (t) => {
  const best = chain(5, 10);
  t.same(link(blocks(7, 9, "a"), onBest(best)), apply([], [], { height: 10, hash: "a-10" }));
});

t.test("a branch at least as high as the best chain becomes best at once; a lower one is kept beside it and nothing leaves", async (t) => {
  const best = chain(5, 10);
  t.same(link(blocks(9, 12, "b", "a"), onBest(best)), apply(blocks(9, 12, "b", "a"), ["a-9", "a-10"], { height: 12, hash: "b-12" }), "higher: best");
  t.same(link(blocks(9, 10, "b", "a"), onBest(best)), apply(blocks(9, 10, "b", "a"), ["a-9", "a-10"], { height: 10, hash: "b-10" }), "as high (the node switched): best");
  t.same(link(blocks(8, 9, "b", "a"), onBest(best)), { kind: "side", keep: blocks(8, 9, "b", "a") }, "lower: a side branch, the tip stays");
});

t.test("a fork told in parts: the tip never goes down, and the branch becomes best with the part that makes it as high", async (t) => {
  const kept = keptChain(chain(0, 100));
  const fork = blocks(56, 100, "b", "a");
  const tips: number[] = [];
  const outcomes: string[] = [];
  for (let i = 0; i < fork.length; i += 20) {
    const part = fork.slice(i, i + 20);
    const linkage = link(part, kept.view(part, 128));
    outcomes.push(linkage.kind);
    kept.apply(linkage);
    tips.push(kept.tip()?.height ?? -1);
  }
  t.same(outcomes, ["side", "side", "apply"], "two parts kept beside, the third wins");
  t.same(tips, [100, 100, 100], "the tip stayed at 100 throughout");
  t.equal(kept.tip()?.hash, "b-100", "and is the branch's once it is as high");
  t.same(kept.lastLeave(), blocks(56, 100, "a").map((b) => b.hash), "every block of the old branch above the fork left, once");
  t.equal(kept.best().get(55), "a-55", "the block below the fork stayed");
});

t.test("a lower branch up to the node's head (toNodeHead): by height it is the node's choice and best at once; bitcoin keeps most work; deeper than the maximum it stops the chain", async (t) => {
  const best = chain(5, 10);
  const lower = blocks(8, 9, "b", "a");
  t.same(link(lower, onBest(best, { toNodeHead: true })), apply(lower, ["a-8", "a-9", "a-10"], { height: 9, hash: "b-9" }), "EVM: the blocks above the fork leave, the tip goes down to the node's head");
  t.same(link(lower, onBest(best, { toNodeHead: false })), { kind: "side", keep: lower }, "a part of a branch short of the node's head: kept beside, as before");
  const work = (h: number) => BigInt(h) * 10n;
  const lighter = lower.map((b) => ({ ...b, work: work(b.height) }));
  t.same(link(lighter, onBest(best, { tip: { height: 10, hash: "a-10", work: work(10) }, toNodeHead: true })).kind, "side", "bitcoin: less work stays a side branch, head or not");
  t.same(link(blocks(7, 10, "a"), onBest(best, { toNodeHead: true })), apply([], [], { height: 10, hash: "a-10" }), "best blocks reported again up to a head change nothing");
  const far = chain(0, 100);
  const deep = link(blocks(60, 80, "b", "a"), onBest(far, { maxDepth: 30, toNodeHead: true }));
  t.same(deep.kind === "halt" && [deep.depth, deep.forkHeight], [41, 59], "41 best blocks would leave: stopped");
  const resumed = link(blocks(60, 80, "b", "a"), onBest(far, { maxDepth: 30, toNodeHead: true, acceptDeeper: true }));
  t.same(resumed.kind === "apply" && [resumed.leave.length, resumed.tip.hash], [41, "b-80"], "resumed: taken, the tip at the node's lower head");
});

t.test("bitcoin: a branch is chosen by chainwork, not height", async (t) => {
  const best = chain(5, 10);
  const work = (h: number, per = 10n) => BigInt(h) * per;
  const view = (o: Partial<ChainView> = {}) => onBest(best, { tip: { height: 10, hash: "a-10", work: work(10) }, ...o });
  const heavier = blocks(9, 9, "b", "a").map((b) => ({ ...b, work: work(8) + 50n }));
  t.same(link(heavier, view()).kind, "apply", "one block with more work than two beats them");
  const longerLighter = blocks(9, 11, "b", "a").map((b) => ({ ...b, work: work(8) + BigInt(b.height - 8) }));
  t.same(link(longerLighter, view()).kind, "side", "three light blocks do not");
  const equal = blocks(9, 10, "b", "a").map((b) => ({ ...b, work: work(b.height) }));
  t.same(link(equal, view()).kind, "apply", "as much work: the node's choice is taken");
});

t.test("a fork that takes away more than the maximum stops the chain; an operator's resume takes it once", async (t) => {
  const best = chain(0, 100);
  const deep = blocks(60, 101, "b", "a");
  const halted = link(deep, onBest(best, { maxDepth: 30 }));
  t.same(halted.kind === "halt" && [halted.depth, halted.forkHeight], [41, 59], "41 blocks would leave: stopped, nothing applied");
  t.match(halted, { atLeast: false, reason: /^a branch from block 59 takes 41 blocks off the best chain/ }, "exactly: the branches part at a kept block");
  const resumed = link(deep, onBest(best, { maxDepth: 30, acceptDeeper: true }));
  t.same(resumed.kind === "apply" && [resumed.leave.length, resumed.tip.hash], [41, "b-101"], "resumed: the branch is best");
  t.equal(link(blocks(71, 101, "b", "a"), onBest(best, { maxDepth: 30 })).kind, "apply", "30 deep: followed");
  t.equal(link(blocks(60, 70, "b", "a"), onBest(best, { maxDepth: 30 })).kind, "side", "a deep branch that does not win yet stops nothing");
});

t.test("a batch linked to nothing kept: read further back, unless it is below the deepest fork followed", async (t) => {
  const best = chain(50, 100);
  const unknown = (from: number, o: Partial<ChainView> = {}) => link(blocks(from, from + 1, "c", "x"), onBest(best, { sideBelow: undefined, maxDepth: 30, ...o }));
  t.equal(unknown(90).kind, "unlinked", "11 below the tip: the watcher reads from further back");
  const deep = unknown(60);
  t.same(deep.kind === "halt" && [deep.depth, deep.atLeast], [42, true], "42 and more below the tip: stopped, the depth a lower bound");
  t.match(unknown(60, { acceptDeeper: true }), { kind: "unlinked", reason: /read from further back/ }, "resumed, still refused: where the branches part is found below it (the kept chain walked down), never guessed by taking every kept block away");
  t.equal(link(blocks(102, 103, "a"), onBest(best, { sideBelow: undefined })).kind, "unlinked", "a gap above the tip");
});

t.test("one whose blocks do not follow each other is malformed", async (t) => {
  const best = chain(5, 10);
  const broken = [...blocks(11, 12, "a"), ...blocks(14, 14, "a")];
  t.equal(link(broken, onBest(best)).kind, "malformed");
});

t.test("a report is admitted only from the lease holder, under the claiming credential, before the lease lapses, of its epoch, and of the chain the core keeps", async (t) => {
  const stored = { epoch: 3, genesisHash: "g0", holder: "w1", credentialId: "ic_1", leaseLive: true };
  const by = { watcherId: "w1", credentialId: "ic_1" };
  t.same(admit(stored, { ...by, epoch: 3, genesisHash: "g0" }, "live", "g0"), { kind: "admitted", newChain: false });
  t.same(admit(stored, { ...by, epoch: 2, genesisHash: "g0" }, "test", "g0"), { kind: "stale_epoch" }, "a watcher that lost the chain");
  t.same(admit(stored, { ...by, epoch: 4, genesisHash: "g0" }, "test", "g0"), { kind: "stale_epoch" }, "an epoch the core never gave");
  t.same(admit(undefined, { ...by, epoch: 1, genesisHash: "g0" }, "test", "g0"), { kind: "stale_epoch" }, "a chain nobody claimed");
  t.equal(admit(stored, { watcherId: "intruder", credentialId: "ic_1", epoch: 3, genesisHash: "g0" }, "test", "g0").kind, "not_holder", "another watcher id with the holder's epoch");
  t.equal(admit(stored, { watcherId: "w1", credentialId: "ic_2", epoch: 3, genesisHash: "g0" }, "test", "g0").kind, "not_holder", "the holder's id under another credential");
  t.equal(admit({ ...stored, credentialId: null }, { ...by, epoch: 3, genesisHash: "g0" }, "test", "g0").kind, "not_holder", "a lease claimed before credentials were kept");
  t.equal(admit({ ...stored, leaseLive: false }, { ...by, epoch: 3, genesisHash: "g0" }, "test", "g0").kind, "not_holder", "a lapsed lease, even the holder's");
  t.same(admit(stored, { ...by, epoch: 3, genesisHash: "g1" }, "test", "g0"), { kind: "admitted", newChain: true }, "another block 0 on Test: a new chain");
  t.same(admit(stored, { ...by, epoch: 3, genesisHash: "g1" }, "live", "g0"), { kind: "other_chain" }, "on Live: refused");
  t.same(admit({ ...stored, genesisHash: null }, { ...by, epoch: 3, genesisHash: "g1" }, "test", "g0"), { kind: "admitted", newChain: false }, "Test's first block 0 is the one the core hears of");
});

t.test("Live's block 0 is the mainnet's, from the code, never from a report", async (t) => {
  const live = { epoch: 3, genesisHash: "gm", holder: "w1", credentialId: "ic_1", leaseLive: true };
  const by = { watcherId: "w1", credentialId: "ic_1" };
  t.same(admit(live, { ...by, epoch: 3, genesisHash: "gm", blocks: 2 }, "live", "gm"), { kind: "admitted", newChain: false }, "mainnet's block 0");
  t.same(admit(live, { ...by, epoch: 3, genesisHash: "g1", blocks: 2 }, "live", "gm"), { kind: "other_chain" }, "another one: refused");
  t.same(admit({ ...live, genesisHash: null }, { ...by, epoch: 3, genesisHash: "g1", blocks: 1 }, "live", "gm"), { kind: "other_chain" }, "the first report too");
  t.same(admit({ ...live, genesisHash: "g1" }, { ...by, epoch: 3, genesisHash: "g1", blocks: 1 }, "live", "gm"), { kind: "other_chain" }, "whatever the core stored before");
  t.same(admit(live, { ...by, epoch: 3, genesisHash: undefined, blocks: 1 }, "live", "gm"), { kind: "other_chain" }, "blocks naming no block 0");
  t.same(admit(live, { ...by, epoch: 3, genesisHash: undefined, blocks: 0 }, "live", "gm"), { kind: "admitted", newChain: false }, "a heartbeat or mempool report names none");
  t.same(admit(live, { ...by, epoch: 3, genesisHash: "gm", blocks: 1 }, "live", undefined), { kind: "other_chain" }, "a network without a known mainnet is not counted on Live");
  t.same(admit(live, { ...by, epoch: 2, genesisHash: "gm", blocks: 1 }, "live", "gm"), { kind: "stale_epoch" }, "the epoch first");
});

t.test("a batch that starts below the first block kept (a chain followed fewer blocks than the fork is deep)", async (t) => {
  const best = chain(50, 60);
  const tip = { height: 60, hash: "a-60" };
  t.same(link(blocks(50, 60, "b", "b"), onBest(best, { sideBelow: undefined })), apply(blocks(50, 60, "b", "b"), blocks(50, 60, "a").map((b) => b.hash), { height: 60, hash: "b-60" }), "no block in common, as high: every kept block leaves, the branch is best");
  t.same(link(blocks(45, 62, "b", "b"), onBest(best, { sideBelow: undefined })).kind, "apply", "one starting further down: the same");
  t.match(link(blocks(50, 58, "b", "b"), onBest(best, { sideBelow: undefined })), { kind: "unlinked", reason: /replace every block the core keeps/ }, "lower: refused, nothing leaves (no kept block to keep it beside)");
  t.same(link([...blocks(48, 54, "a"), ...blocks(55, 61, "b", "a")], onBest(best, { sideBelow: undefined })), apply(blocks(55, 61, "b", "a"), blocks(55, 60, "a").map((b) => b.hash), { height: 61, hash: "b-61" }), "a kept block in the batch: the branches part there");
  t.same(link(blocks(48, 55, "a"), onBest(best, { sideBelow: undefined })), apply([], [], tip), "kept blocks reported again from below: nothing changes");
  t.match(link(blocks(50, 61, "b", "b"), onBest(best, { sideBelow: undefined, maxDepth: 10 })), { kind: "halt", depth: 11 }, "more kept blocks than the maximum: the chain stops");
});

t.test("a deep fork below every block kept: its depth is exact where the watcher found the branches part, a lower bound where it did not", async (t) => {
  const best = chain(50, 60);
  const found = link(blocks(45, 61, "b", "a"), onBest(best, { sideBelow: undefined, maxDepth: 10 }));
  t.match(found, { kind: "halt", depth: 16, atLeast: false, forkHeight: 44 }, "parting at block 44, as the watcher found: 16 blocks");
  t.match(found, { reason: /^a branch from block 44 takes 16 blocks off the best chain/ }, "said exactly");
  const unknown = link(blocks(45, 61, "b", "b"), onBest(best, { sideBelow: undefined, maxDepth: 10, forkPointUnknown: true }));
  t.match(unknown, { kind: "halt", depth: 16, atLeast: true, forkHeight: 44 }, "the watcher did not find where: at least 16 blocks");
  t.match(unknown, { reason: /^a branch from block 44 or below takes at least 16 blocks off the best chain/ }, "said as a lower bound");
  const common = link([...blocks(48, 54, "a"), ...blocks(55, 71, "b", "a")], onBest(best, { sideBelow: undefined, maxDepth: 3, forkPointUnknown: true }));
  t.match(common, { kind: "halt", depth: 6, atLeast: false }, "a kept block in the batch: the branches part there, whatever the watcher said");
  const onBestChain = link(blocks(60, 101, "b", "a"), onBest(chain(0, 100), { maxDepth: 30, forkPointUnknown: true }));
  t.match(onBestChain, { kind: "halt", depth: 41, atLeast: false }, "a parent on the best chain: exact");
  t.equal(link(blocks(45, 61, "b", "b"), onBest(best, { sideBelow: undefined, maxDepth: 20, forkPointUnknown: true })).kind, "apply", "within the maximum: followed");
});

t.test("a fork below every block kept, the watcher having found none of them on the node's chain: stopped however far the batch reaches; resumed, the kept chain starts over from the branch", async (t) => {
  const best = chain(10, 99);
  const part = blocks(10, 40, "b", "b");
  const view = (o: Partial<ChainView> = {}) => onBest(best, { sideBelow: undefined, maxDepth: 5, forkPointUnknown: true, ...o });
  const halted = link(part, view());
  t.match(halted, { kind: "halt", depth: 90, atLeast: true, forkHeight: 9 }, "a part lower than the kept chain: stopped, at least 90 blocks deep (not refused as unlinked, over and over)");
  t.match(halted, { reason: /^a branch from block 9 or below takes at least 90 blocks off the best chain/ }, "said as a lower bound");
  const resumed = link(part, view({ acceptDeeper: true }));
  t.same(
    resumed,
    { kind: "apply", append: part, rejoin: [], leave: [...best.values()], tip: { height: 40, hash: "b-40" }, restart: true },
    "resumed: every kept block leaves and the branch is best from the lowest height kept, its tip lower for now",
  );
  const kept = keptChain(best);
  kept.resume();
  kept.apply(resumed);
  const rest = blocks(41, 99, "b");
  const next = link(rest, kept.view(rest, 5));
  t.match(next, { kind: "apply", leave: [] }, "the branch's next blocks extend it");
  t.equal(link(blocks(10, 99, "b", "b"), view({ maxDepth: 100 })).kind, "apply", "within the maximum (a chain followed for fewer blocks): the whole branch in one batch is followed");
  t.match(link(part, view({ maxDepth: 100 })), { kind: "unlinked" }, "and a part of it still waits for the rest");
});

t.test("blocksTaken: a depth in words, \"at least\" when it is a lower bound", async (t) => {
  t.equal(blocksTaken(40, false), "40 blocks");
  t.equal(blocksTaken(32, true), "at least 32 blocks");
  t.equal(blocksTaken(1, false), "1 block");
  t.equal(blocksTaken(1, true), "at least 1 block");
});
