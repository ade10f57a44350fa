// How the core links a reported batch of blocks to the best chain it keeps: only another block at
// a height is a fork, a repeated block changes nothing, a batch that links to nothing is refused.
import t from "tap";
import { admit, link, type LinkBlock } from "../../services/chains/linkage.ts";

/** Blocks `from..to` of branch `b` (hash `<b>-<height>`), the first one's parent on branch `parent`. */
function blocks(from: number, to: number, b: string, parent = b): LinkBlock[] {
  const out: LinkBlock[] = [];
  for (let h = from; h <= to; h++) out.push({ height: h, hash: `${b}-${h}`, parentHash: h === from ? `${parent}-${h - 1}` : `${b}-${h - 1}` });
  return out;
}
const chain = (from: number, to: number, b = "a") => new Map(blocks(from, to, b).map((x) => [x.height, x.hash]));
const tipOf = (m: Map<number, string>) => {
  const h = Math.max(...m.keys());
  return { height: h, hash: m.get(h) as string };
};

t.test("the first batch starts the chain; the next one extends its tip", async (t) => {
  const first = link(blocks(5, 7, "a"), new Map(), undefined);
  t.same(first, { kind: "apply", append: blocks(5, 7, "a"), leave: [], tip: { height: 7, hash: "a-7" } });
  const best = chain(5, 7);
  t.same(link(blocks(8, 9, "a"), best, tipOf(best)), { kind: "apply", append: blocks(8, 9, "a"), leave: [], tip: { height: 9, hash: "a-9" } });
});

t.test("blocks reported again change nothing", async (t) => {
  const best = chain(5, 10);
  t.same(link(blocks(7, 9, "a"), best, tipOf(best)), { kind: "apply", append: [], leave: [], tip: { height: 10, hash: "a-10" } });
});

t.test("another block at a height is a fork: the old branch above the fork point leaves, even where the new one is shorter", async (t) => {
  const best = chain(5, 10);
  const longer = link(blocks(9, 12, "b", "a"), best, tipOf(best));
  t.same(longer, { kind: "apply", append: blocks(9, 12, "b", "a"), leave: ["a-9", "a-10"], tip: { height: 12, hash: "b-12" } });
  const shorter = link(blocks(8, 9, "b", "a"), best, tipOf(best));
  t.same(shorter, { kind: "apply", append: blocks(8, 9, "b", "a"), leave: ["a-8", "a-9", "a-10"], tip: { height: 9, hash: "b-9" } });
});

t.test("a fork two deep, then the old branch winning back: each switch leaves the other branch", async (t) => {
  const best = chain(5, 10);
  const toB = link(blocks(9, 11, "b", "a"), best, tipOf(best));
  t.equal(toB.kind, "apply");
  if (toB.kind !== "apply") return;
  t.same(toB.leave, ["a-9", "a-10"]);
  const afterB = new Map([...chain(5, 8), ...chain(9, 11, "b")]);
  afterB.set(9, "b-9");
  const back = link(blocks(9, 12, "a"), afterB, tipOf(afterB));
  t.same(back, { kind: "apply", append: blocks(9, 12, "a"), leave: ["b-9", "b-10", "b-11"], tip: { height: 12, hash: "a-12" } });
});

t.test("a batch that links to no block of the best chain is refused; one whose blocks do not follow each other is malformed", async (t) => {
  const best = chain(5, 10);
  const gap = link(blocks(12, 13, "a"), best, tipOf(best));
  t.equal(gap.kind, "unlinked", "a gap above the tip");
  const stranger = link(blocks(9, 10, "c", "x"), best, tipOf(best));
  t.equal(stranger.kind, "unlinked", "a parent the core does not have");
  const broken = [...blocks(11, 12, "a"), ...blocks(14, 14, "a")];
  t.equal(link(broken, best, tipOf(best)).kind, "malformed");
});

t.test("a report is admitted only from the lease's epoch, and of the chain the core keeps", async (t) => {
  const stored = { epoch: 3, genesisHash: "g0" };
  t.same(admit(stored, { epoch: 3, genesisHash: "g0" }, "live"), { kind: "admitted", newChain: false });
  t.same(admit(stored, { epoch: 2, genesisHash: "g0" }, "test"), { kind: "stale_epoch" }, "a watcher that lost the chain");
  t.same(admit(stored, { epoch: 4, genesisHash: "g0" }, "test"), { kind: "stale_epoch" }, "an epoch the core never gave");
  t.same(admit(undefined, { epoch: 1, genesisHash: "g0" }, "test"), { kind: "stale_epoch" }, "a chain nobody claimed");
  t.same(admit(stored, { epoch: 3, genesisHash: "g1" }, "test"), { kind: "admitted", newChain: true }, "another block 0 on Test: a new chain");
  t.same(admit(stored, { epoch: 3, genesisHash: "g1" }, "live"), { kind: "other_chain" }, "on Live: refused");
  t.same(admit({ epoch: 3, genesisHash: null }, { epoch: 3, genesisHash: "g1" }, "live"), { kind: "admitted", newChain: false }, "the first block 0 the core hears of");
});
