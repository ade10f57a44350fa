/**
 * How a batch of reported blocks joins the chain the core keeps: pure, so that fork choice can be
 * tested without a database. The node decides which chain is best (the watcher proved it serves
 * the right chain and is not behind); the core decides what that means for what it stored. A
 * branch told in parts (a watcher reports a long fork a batch at a time) is kept beside the best
 * chain until it beats it, and then becomes best at once: a block that stays on the best chain
 * never loses a confirmation while the rest of a fork is on its way.
 */
import { blocksTaken } from "../vocabulary/assets.ts";

export interface LinkBlock {
  height: number;
  hash: string;
  parentHash: string;
  /** The chain's work up to this block (bitcoin's chainwork); undefined where branches are compared by height (EVM). */
  work?: bigint | undefined;
}

/** A block the core keeps: on the best chain or on a side branch. */
export interface KeptBlock {
  height: number;
  hash: string;
  work?: bigint | undefined;
}

export interface ChainView {
  /** The best tip; undefined when the core keeps no block of the chain yet (then any batch starts it). */
  tip: KeptBlock | undefined;
  /** The best chain by height, from the batch's parent height (or the lowest side block below it) up to the tip. */
  best: ReadonlyMap<number, string>;
  /**
   * The side branch the batch continues, lowest first: the kept blocks that are not best from
   * just above the best chain up to the batch's parent. Empty when the parent is on the best
   * chain; undefined when the core keeps no block with the batch's parent hash.
   */
  sideBelow: readonly KeptBlock[] | undefined;
  /** How many best blocks a fork may take away and still be followed (the network's maximum reorg depth). */
  maxDepth: number;
  /**
   * An operator resumed the chain after a deeper fork stopped it, and the batch is of that fork's
   * branch (report.ts checks it holds the halted branch's lowest block): it is taken whatever its depth.
   */
  acceptDeeper: boolean;
  /**
   * The watcher did not find where the node's chain parts from the one it reported (every block it
   * knew left it): the batch's parent is where it could read from, and the branches may part lower.
   */
  forkPointUnknown?: boolean;
  /**
   * The batch ends at the node's head (the report's head): the branch is the node's best chain as
   * it stands. Where branches are compared by height (EVM), such a branch is taken even when it
   * is lower than the best tip: the node's fork choice picked it (proof of stake picks by
   * attestations, not height), and the blocks above where it parts are no longer on the node's
   * chain. Bitcoin too, now that the node's chainwork is not taken (a block kept from before
   * with work is compared by it): a bitcoin node's best chain is its most-work one.
   */
  toNodeHead?: boolean;
}

export type Linkage =
  /** The batch is not a run of consecutive blocks: the watcher's mistake, nothing to retry. */
  | { kind: "malformed"; reason: string }
  /** The batch links to no block the core keeps: the watcher must read from further back. */
  | { kind: "unlinked"; reason: string }
  /** A branch that does not beat the best chain (yet): its new blocks are kept beside it, nothing counts differently. */
  | { kind: "side"; keep: LinkBlock[] }
  /**
   * A branch that beats the best chain by taking away more blocks than the maximum: nothing
   * changes, and the chain stops counting. `atLeast`: the branches part at `forkHeight` or below
   * (below every block the watcher and the core knew), so `depth` is a lower bound.
   */
  | { kind: "halt"; depth: number; atLeast: boolean; forkHeight: number; reason: string }
  | {
      kind: "apply";
      /** Blocks of the batch not on the best chain yet (appended, or coming back). */
      append: LinkBlock[];
      /** Hashes of kept side blocks below the batch that join the best chain with it, lowest first. */
      rejoin: string[];
      /** Hashes of best-chain blocks that leave it (a fork), lowest first. */
      leave: string[];
      /** The best tip afterwards. */
      tip: KeptBlock;
      /**
       * The whole kept chain leaves (an operator resumed after a fork deeper than every block kept:
       * the watcher found none of them on the node's chain, and reads the branch from the lowest).
       */
      restart: boolean;
    };

/** Whether branch tip `a` beats or equals `b`: by work where both have it (bitcoin), else by height. */
export function atLeastAsGood(a: KeptBlock, b: KeptBlock): boolean {
  if (a.work !== undefined && b.work !== undefined) return a.work >= b.work;
  return a.height >= b.height;
}

/** Whether a branch with tip `a` replaces the best chain with tip `b`: it is as good, or (by height) it is the node's whole best chain. */
function wins(a: KeptBlock, b: KeptBlock, view: ChainView): boolean {
  if (atLeastAsGood(a, b)) return true;
  return view.toNodeHead === true && a.work === undefined && b.work === undefined;
}

export function link(batch: readonly LinkBlock[], view: ChainView): Linkage {
  const { tip, best } = view;
  const first = batch[0];
  if (!first) return tip ? { kind: "apply", append: [], rejoin: [], leave: [], tip, restart: false } : { kind: "malformed", reason: "no blocks, and no chain to keep" };
  for (let i = 1; i < batch.length; i++) {
    const b = batch[i] as LinkBlock;
    const prev = batch[i - 1] as LinkBlock;
    if (b.height !== prev.height + 1 || b.parentHash !== prev.hash) {
      return { kind: "malformed", reason: `block ${b.height} (${b.hash}) does not follow block ${prev.height} (${prev.hash}) of the batch` };
    }
  }
  const last = batch.at(-1) as LinkBlock;
  const lastKept: KeptBlock = { height: last.height, hash: last.hash, work: last.work };
  if (!tip) return { kind: "apply", append: [...batch], rejoin: [], leave: [], tip: lastKept, restart: false };

  const side = view.sideBelow;
  if (side === undefined) {
    if (first.height <= tip.height && !best.has(first.height - 1)) return belowKept(batch, { ...view, tip });
    // Linked to nothing kept, from below the deepest fork followed: the branches part deeper than
    // that. The chain stops (nothing changes); but where they part is for the watcher to find
    // (ListBestBlocks hands it the kept chain below what it knows), never guessed: a batch that
    // starts where the core keeps another block is not taken even resumed, since leaving every
    // kept block would take away blocks that stayed, and leave the branch's lower blocks unread.
    const depthAtLeast = tip.height - first.height + 2;
    if (first.height - 1 <= tip.height && depthAtLeast > view.maxDepth && !view.acceptDeeper) {
      const reason = `block ${first.height}'s parent ${first.parentHash} is not a block the core keeps: the node's chain parts from the one counted at least ${depthAtLeast} blocks below the tip ${tip.height}`;
      return { kind: "halt", depth: depthAtLeast, atLeast: true, forkHeight: first.height - 1, reason };
    }
    return {
      kind: "unlinked",
      reason: `block ${first.height}'s parent ${first.parentHash} is not a block the core keeps (its best tip is ${tip.height}, ${tip.hash}): read from further back`,
    };
  }
  if (side.length === 0 && best.get(first.height - 1) !== first.parentHash) {
    return { kind: "unlinked", reason: `block ${first.height}'s parent ${first.parentHash} is not block ${first.height - 1} of the best chain: read from further back` };
  }

  // The branch from where it leaves the best chain: the side blocks kept below the batch, then the
  // batch's blocks that are not best (a batch that repeats best blocks changes nothing there).
  const fresh = side.length > 0 ? [...batch] : batch.filter((b) => best.get(b.height) !== b.hash);
  const forkHeight = (side[0]?.height ?? fresh[0]?.height ?? last.height + 1) - 1;
  if (fresh.length === 0) return { kind: "apply", append: [], rejoin: [], leave: [], tip, restart: false };
  if (side.length === 0 && forkHeight >= tip.height) {
    // The tip extended: nothing leaves.
    return { kind: "apply", append: fresh, rejoin: [], leave: [], tip: lastKept, restart: false };
  }
  if (!wins(lastKept, tip, view)) return { kind: "side", keep: fresh };
  return forkFrom(forkHeight, fresh, side.map((b) => b.hash), lastKept, { ...view, tip });
}

/**
 * Whether the core takes a report at all, before any block is linked: only from the lease holder
 * (its watcher id, under the credential that claimed the lease, before the lease lapses) and its
 * current epoch (an older one is a watcher that lost the chain), and of the chain the core keeps.
 * On Test another block 0 is a new chain (a dev chain restarted). On Live block 0 is the
 * network's mainnet's, from the code (`mainnet`), never from a report: a report naming another
 * one is refused, the first one too, and so is one naming none once blocks are reported.
 */
export function admit(
  stored: { epoch: number; genesisHash: string | null; holder: string; credentialId: string | null; leaseLive: boolean } | undefined,
  report: { epoch: number; genesisHash: string | undefined; watcherId: string; credentialId: string; blocks?: number },
  environment: "test" | "live",
  mainnet: string | undefined,
): { kind: "stale_epoch" } | { kind: "not_holder"; why: string } | { kind: "other_chain" } | { kind: "admitted"; newChain: boolean } {
  if (!stored || stored.epoch !== report.epoch) return { kind: "stale_epoch" };
  if (stored.holder !== report.watcherId) return { kind: "not_holder", why: "another watcher holds it" };
  if (stored.credentialId === null || stored.credentialId !== report.credentialId) return { kind: "not_holder", why: "it was claimed under another credential" };
  if (!stored.leaseLive) return { kind: "not_holder", why: "the lease lapsed" };
  if (environment === "live") {
    if (mainnet === undefined) return { kind: "other_chain" };
    if (report.genesisHash !== undefined ? report.genesisHash !== mainnet : (report.blocks ?? 0) > 0) return { kind: "other_chain" };
    return { kind: "admitted", newChain: false };
  }
  const other = report.genesisHash !== undefined && stored.genesisHash !== null && stored.genesisHash !== report.genesisHash;
  return { kind: "admitted", newChain: other };
}

/**
 * A batch that starts at or below the first block the core keeps, so its parent is no block kept:
 * the core began following the chain fewer blocks ago than the fork is deep. Where one of the
 * batch's blocks is kept, the branches part there, as in any fork. Where none is, every kept block
 * leaves (nothing below them was ever counted), the fork parts just below the batch at most
 * (its depth counts from there), and the branch must beat the kept chain in this one batch, having
 * no kept block to be kept beside.
 */
function belowKept(batch: readonly LinkBlock[], view: ChainView & { tip: KeptBlock }): Linkage {
  const { tip, best } = view;
  const last = batch.at(-1) as LinkBlock;
  const lastKept: KeptBlock = { height: last.height, hash: last.hash, work: last.work };
  // Blocks below the first one kept that lead up to a kept block are no fork.
  const common = batch.findLastIndex((b) => best.get(b.height) === b.hash) >= 0;
  const fresh = batch.slice(batch.findLastIndex((b) => best.get(b.height) === b.hash) + 1);
  const start = fresh[0];
  if (!start) return { kind: "apply", append: [], rejoin: [], leave: [], tip, restart: false };
  const forkHeight = start.height - 1;
  if (common && forkHeight >= tip.height) return { kind: "apply", append: fresh, rejoin: [], leave: [], tip: lastKept, restart: false };
  if (!common && view.forkPointUnknown === true && tip.height - forkHeight > view.maxDepth) {
    // The watcher found no block the core keeps on the node's chain, down to the lowest one, and
    // reads from there: the fork is deeper than every block kept, and than the maximum. The chain
    // stops whether or not this batch beats the kept chain yet; resumed, the kept chain starts
    // over from the branch, read from the height of the lowest kept block (the tip may go down
    // meanwhile: the operator said so, and the branch's next batches follow).
    if (!view.acceptDeeper) return forkFrom(forkHeight, fresh, [], lastKept, view, true);
    const leave = [...best.entries()].sort(([a], [b]) => a - b).map(([, hash]) => hash);
    return { kind: "apply", append: fresh, rejoin: [], leave, tip: lastKept, restart: true };
  }
  if (!wins(lastKept, tip, view)) {
    if (common) return { kind: "side", keep: fresh };
    return {
      kind: "unlinked",
      reason: `blocks ${start.height}-${last.height} replace every block the core keeps (its best tip is ${tip.height}, ${tip.hash}) without beating them yet: report the branch up to the node's head`,
    };
  }
  // Where no block is in common, the watcher reads from just above where it found the branches
  // part (it knows the node's blocks below the first one reported), or, where it did not find
  // it (it says so), from the lowest block it knew: then they part there or further down.
  return forkFrom(forkHeight, fresh, [], lastKept, view, !common && view.forkPointUnknown === true);
}

/**
 * A branch parting from the best chain above `forkHeight` (`atLeast`: at it or below) that beats
 * it: best, unless it takes more blocks away than the maximum.
 */
function forkFrom(forkHeight: number, append: LinkBlock[], rejoin: string[], lastKept: KeptBlock, view: ChainView & { tip: KeptBlock }, atLeast = false): Linkage {
  const { tip, best } = view;
  const leave = [...best.entries()].filter(([h]) => h > forkHeight).sort(([a], [b]) => a - b).map(([, hash]) => hash);
  const depth = tip.height - forkHeight;
  if (depth > view.maxDepth && !view.acceptDeeper) {
    const from = atLeast ? `block ${forkHeight} or below` : `block ${forkHeight}`;
    return {
      kind: "halt",
      depth,
      atLeast,
      forkHeight,
      reason: `a branch from ${from} takes ${blocksTaken(depth, atLeast)} off the best chain (tip ${tip.height}, ${tip.hash}), more than the ${view.maxDepth} followed`,
    };
  }
  return { kind: "apply", append, rejoin, leave, tip: lastKept, restart: false };
}
