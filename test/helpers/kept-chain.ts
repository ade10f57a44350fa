// The chain the core keeps (chain_blocks: every reported block by hash, `best` marking the best
// chain), in memory, linked by the real rule (services/chains/linkage.ts) as chains/report.ts
// does: for unit tests of fork choice and of the follower against a core that keeps side branches.
import type { ChainView, KeptBlock, LinkBlock, Linkage } from "../../services/chains/linkage.ts";

interface Kept extends KeptBlock {
  parentHash: string;
  best: boolean;
}

export function keptChain(initial: ReadonlyMap<number, string> = new Map()) {
  const blocks = new Map<string, Kept>();
  for (const [height, hash] of initial) blocks.set(hash, { height, hash, parentHash: initial.get(height - 1) ?? "", best: true });
  let leave: string[] = [];
  let acceptDeeper = false;

  const best = () => new Map([...blocks.values()].filter((b) => b.best).map((b) => [b.height, b.hash]));
  const tip = (): KeptBlock | undefined => {
    const all = [...blocks.values()].filter((b) => b.best);
    const top = all.sort((x, y) => y.height - x.height)[0];
    return top && { height: top.height, hash: top.hash, work: top.work };
  };
  /** The side branch from above the best chain up to `hash`, lowest first; undefined when the walk ends at a block not kept. */
  const sideTo = (hash: string): Kept[] | undefined => {
    const out: Kept[] = [];
    for (let b = blocks.get(hash); ; b = blocks.get(b.parentHash)) {
      if (!b) return undefined;
      if (b.best) return out.reverse();
      out.push(b);
    }
  };

  return {
    best,
    tip,
    /** The best chain's newest `count` blocks below `before`, oldest first (ChainService.ListBestBlocks). */
    bestBefore(before: number, count: number): { height: number; hash: string }[] {
      return [...best().entries()]
        .filter(([h]) => h < before)
        .sort(([a], [b]) => a - b)
        .slice(-count)
        .map(([height, hash]) => ({ height, hash }));
    },
    lastLeave: () => leave,
    /** An operator's resume: the next fork is taken whatever its depth, until the best chain next changes. */
    resume() {
      acceptDeeper = true;
    },
    view(batch: readonly LinkBlock[], maxDepth: number, o: { forkPointUnknown?: boolean } = {}): ChainView {
      const first = batch[0];
      return { tip: tip(), best: best(), sideBelow: first && tip() ? sideTo(first.parentHash) : [], maxDepth, acceptDeeper, forkPointUnknown: o.forkPointUnknown === true };
    },
    apply(linkage: Linkage): void {
      if (linkage.kind === "side") {
        for (const b of linkage.keep) blocks.set(b.hash, { ...b, best: false });
        return;
      }
      if (linkage.kind !== "apply") return;
      leave = linkage.restart ? [...best().values()] : linkage.leave;
      for (const h of leave) (blocks.get(h) as Kept).best = false;
      for (const h of linkage.rejoin) (blocks.get(h) as Kept).best = true;
      for (const b of linkage.append) blocks.set(b.hash, { ...b, best: true });
      // As the core: a resume is spent when the best chain next changes, by its fork or without it.
      if (leave.length > 0 || linkage.rejoin.length > 0 || linkage.append.length > 0) acceptDeeper = false;
    },
  };
}
