/**
 * How a batch of reported blocks joins the best chain the core keeps: pure, so that fork choice
 * can be tested without a database. The node decides which chain is best (the watcher proved it
 * serves the right chain and is not behind); the core decides what that means for what it stored.
 */

export interface LinkBlock {
  height: number;
  hash: string;
  parentHash: string;
}

export type Linkage =
  /** The batch is not a run of consecutive blocks: the watcher's mistake, nothing to retry. */
  | { kind: "malformed"; reason: string }
  /** The batch links to no block of the best chain: the watcher must read from further back. */
  | { kind: "unlinked"; reason: string }
  | {
      kind: "apply";
      /** Blocks of the batch not on the best chain yet (appended, or coming back). */
      append: LinkBlock[];
      /** Hashes of best-chain blocks that leave it (a fork), lowest first. */
      leave: string[];
      /** The best tip afterwards. */
      tip: { height: number; hash: string };
    };

/**
 * `best` is the stored best chain by height, from the batch's parent height up to the stored tip
 * (the tip is its highest entry); empty when the core stores no block of the chain yet, and then
 * any batch starts it.
 */
export function link(batch: readonly LinkBlock[], best: ReadonlyMap<number, string>, tip: { height: number; hash: string } | undefined): Linkage {
  const first = batch[0];
  if (!first) return tip ? { kind: "apply", append: [], leave: [], tip } : { kind: "malformed", reason: "no blocks, and no chain to keep" };
  for (let i = 1; i < batch.length; i++) {
    const b = batch[i] as LinkBlock;
    const prev = batch[i - 1] as LinkBlock;
    if (b.height !== prev.height + 1 || b.parentHash !== prev.hash) {
      return { kind: "malformed", reason: `block ${b.height} (${b.hash}) does not follow block ${prev.height} (${prev.hash}) of the batch` };
    }
  }
  const last = batch.at(-1) as LinkBlock;
  if (!tip) return { kind: "apply", append: [...batch], leave: [], tip: { height: last.height, hash: last.hash } };
  if (best.get(first.height - 1) !== first.parentHash) {
    return {
      kind: "unlinked",
      reason: `block ${first.height}'s parent ${first.parentHash} is not block ${first.height - 1} of the best chain the core keeps (its tip is ${tip.height}, ${tip.hash}): read from further back`,
    };
  }
  // Only another block at a height is a fork; a batch that repeats known blocks changes nothing.
  const forkAt = batch.find((b) => best.has(b.height) && best.get(b.height) !== b.hash)?.height;
  const append = batch.filter((b) => best.get(b.height) !== b.hash);
  if (forkAt === undefined) {
    const newTip = last.height > tip.height ? { height: last.height, hash: last.hash } : tip;
    return { kind: "apply", append, leave: [], tip: newTip };
  }
  const leave = [...best.entries()].filter(([h]) => h >= forkAt).sort(([a], [b]) => a - b).map(([, hash]) => hash);
  return { kind: "apply", append, leave, tip: { height: last.height, hash: last.hash } };
}

/**
 * Whether the core takes a report at all, before any block is linked: only from the lease's
 * current epoch (an older one is a watcher that lost the chain), and of the chain the core keeps
 * (another block 0 is a new chain on Test, and refused on Live).
 */
export function admit(
  stored: { epoch: number; genesisHash: string | null } | undefined,
  report: { epoch: number; genesisHash: string | undefined },
  environment: "test" | "live",
): { kind: "stale_epoch" } | { kind: "other_chain" } | { kind: "admitted"; newChain: boolean } {
  if (!stored || stored.epoch !== report.epoch) return { kind: "stale_epoch" };
  const other = report.genesisHash !== undefined && stored.genesisHash !== null && stored.genesisHash !== report.genesisHash;
  if (other && environment === "live") return { kind: "other_chain" };
  return { kind: "admitted", newChain: other };
}
