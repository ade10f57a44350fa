/** A block the watcher processed. */
export interface BlockRef {
  height: number;
  hash: string;
}

/** One output to a watched address, as reported to the core. */
export interface Output {
  asset: string;
  /** The watched address as the core handed it out. */
  toAddress: string;
  txHash: string;
  /**
   * Its position within its transaction, the same in whichever block the transaction is mined: a
   * bitcoin output's vout; on EVM chains 0 for the transaction's own value, 1 + the log's index
   * among its transaction's receipt logs for a token Transfer.
   */
  outputIndex: number;
  amount: string;
  blockHeight: number;
  blockHash: string;
  blockTime: number;
  /** Bitcoin: its transaction's bytes without witnesses (ReportedOutput.raw_transaction). */
  rawTransaction?: Uint8Array;
}

/** A block of the best chain with its outputs to watched addresses, as reported to the core. */
export interface ReportedBlock extends SourceBlock {
  outputs: Output[];
}

/** What the follower asks of the core (ChainService.ReportBlocks, over gRPC or in-process). */
export interface Core {
  /**
   * Reports consecutive blocks of the node's best chain, lowest first (none: a heartbeat with the
   * head). The core links them to the best chain it keeps (a different block at a height is a
   * fork, which the core itself applies), derives confirmations and settles intents.
   * `forkPointUnknown`: every block the follower knew left the node's best chain, and so did
   * every best block the core keeps below them: the first block is the lowest the core keeps (or
   * the follower knew), so its parent is not where the branches part, which is lower.
   */
  report(blocks: readonly ReportedBlock[], head: { height: number; time: number | undefined }, o?: { forkPointUnknown?: boolean }): Promise<void>;
}

/** A block as a source read it. */
export interface SourceBlock {
  height: number;
  hash: string;
  parentHash: string;
  /** Seconds since the epoch. */
  time: number;
  /** The chain's work up to the block, hex, where the watcher sums it (bitcoin: its header chain's work above the checkpoint): the core picks branches by it. */
  chainwork?: string;
}

/**
 * What the follower reads of one chain, whatever its kind (EVM, bitcoin): the best chain's
 * hashes, and blocks with their outputs to the watched addresses. Hashes are lowercase.
 */
export interface ChainSource {
  headHeight(): Promise<number>;
  /** The best chain's block hash at `height`, or undefined past the head. */
  hashAt(height: number): Promise<string | undefined>;
  /**
   * Blocks from..to of the best chain, in order, and their outputs to watched addresses; undefined
   * when the chain changed under the read (the next step sorts it out). The follower checks the
   * blocks link up by parent hash.
   */
  read(from: number, to: number): Promise<{ blocks: SourceBlock[]; outputs: Output[] } | undefined>;
  /** Blocks read per step while catching up. */
  readonly batchBlocks: number;
}

/**
 * The core's best chain below `beforeHeight`: its newest `count` blocks there, oldest first, none
 * when it keeps none that low (ChainService.ListBestBlocks, over gRPC or in-process).
 */
export type BestBefore = (beforeHeight: number, count: number) => Promise<BlockRef[]>;

/** How many of the core's best blocks the follower asks for at a time while it looks for a fork point below what it keeps. */
export const keptPage = 256;

export interface FollowerOptions {
  source: ChainSource;
  core: Core;
  /** How many reported blocks are kept to find where a fork left the chain (ClaimChain's recent blocks: twice the deepest fork followed, and some). */
  keep: number;
  /**
   * The core's best chain below a height: when every block the follower keeps left the node's
   * best chain, it walks down these a page at a time to where the branches part (the core keeps
   * 2 048 blocks), so that the other branch is read from there and the fork measured exactly.
   */
  bestBefore: BestBefore;
  /** Told of each block reported and each output in it. */
  onBlock?: (block: SourceBlock, head: number) => void;
  onOutput?: (output: Output) => void;
  /** Told of the blocks the node no longer has on its best chain (the core un-counts them when the other branch is reported). */
  onReorg?: (orphaned: BlockRef[]) => void;
  /**
   * Called before going back to a fork point: throws when the node no longer serves the chain
   * the blocks were read from (reset, replaced), which is no fork.
   */
  confirmFork?: () => Promise<void>;
}

/** The first batch after slowStart, in blocks. */
const firstStride = 2;

/**
 * Reads one chain from the core's best tip on and reports each new block, with its outputs to
 * watched addresses, to the core, which keeps the chain, derives confirmations and settles. The
 * follower only finds where the node's best chain and the reported one part (by block hashes,
 * never by the node's removed logs) and reads on from there: the core sees the fork as a batch
 * whose parent is an earlier block. A node behind what was reported has nothing new to tell.
 */
export class Follower {
  readonly #o: FollowerOptions;
  #keep: number;
  #height: number;
  #recent: BlockRef[];
  /**
   * Every block the core keeps left the node's best chain: the other branch is read up to the
   * head in one batch, since the core has no kept block to keep a part of it beside.
   */
  #wholeBranch = false;
  /**
   * Every block kept left the node's best chain, the oldest too, and so did every block the core
   * keeps below them: where the branches part is below what the core and the follower know, and
   * the next batch reported says so (a depth counted from its parent is a lower bound).
   */
  #forkPointUnknown = false;
  /**
   * The next batches, read while the core takes the one before (catching up, reading and recording
   * overlap): one, or two while the batches still grow after slowStart.
   */
  #ahead: { from: number; to: number; read: Promise<Awaited<ReturnType<ChainSource["read"]>>> }[] = [];

  /** The highest of the recent blocks that was never reported (read from the node when following began): the core keeps none up to it. */
  #unreported: number;

  /**
   * How many blocks the next step reads: batchBlocks, or fewer just after slowStart, doubling
   * with each batch reported. A node back from an outage with a backlog waiting has its first
   * outputs counted after a batch of 2 blocks rather than 20 (a 20-block batch of a busy chain
   * took a second to record); the batches are back to full size four steps later.
   */
  #stride: number;

  /**
   * `unreported`: recent blocks up to this height were read from the node, not reported (a chain
   * followed for the first time), so that a fork below the first block reported is found where it is.
   */
  constructor(o: FollowerOptions, position: { height: number; recentBlocks: BlockRef[]; unreported?: number }) {
    this.#o = o;
    this.#keep = Math.max(1, o.keep);
    this.#height = position.height;
    this.#recent = [...position.recentBlocks];
    this.#unreported = position.unreported ?? -1;
    this.#stride = o.source.batchBlocks;
  }

  /** The next batches start small and double back to batchBlocks (#stride): called when the node comes back from a failure. */
  slowStart(): void {
    this.#stride = Math.min(this.#o.source.batchBlocks, firstStride);
  }

  get position(): { height: number; recentBlocks: BlockRef[] } {
    return { height: this.#height, recentBlocks: [...this.#recent] };
  }

  /** After taking over (a restart, or another watcher's lease): checks the core's tip is still on the node's best chain. */
  async resume(): Promise<void> {
    await this.#checkCanonical();
  }

  /** One step towards `head`: at most batchBlocks blocks; false when there was nothing to do. */
  async step(head: number): Promise<boolean> {
    // A node behind what was processed has nothing new to tell, and no say on what it has not seen;
    // one whose head is another block than the one reported there took a lower branch.
    if (head < this.#height) return this.lowerBranch(head);
    if (await this.#checkCanonical()) return true;
    if (head <= this.#height) return false;
    const to = Math.min(head, this.#height + this.#stride + (this.#wholeBranch ? this.#keep : 0));
    await this.#scan(this.#height + 1, to, head);
    return true;
  }

  /**
   * Whether the node, its head below what was reported, took another branch (then the position
   * moved back to where they part, below the head, and the next step reports the branch up to
   * it): the node's block at its head is not the one reported at that height. The blocks above
   * where they part leave now, not once the node's branch is as high (an EVM node picks branches
   * by its fork choice, not height). A node that is only behind has the reported block there:
   * nothing changes. So does a head below every block kept (`keep`: twice the deepest fork followed).
   */
  async lowerBranch(head: number): Promise<boolean> {
    if (head >= this.#height) return false;
    const at = this.#recent.findLastIndex((b) => b.height === head);
    if (at < 0) return false;
    const hash = await this.#o.source.hashAt(head);
    if (hash === undefined || hash === (this.#recent[at] as BlockRef).hash) return false;
    return this.#rewind(at);
  }

  /** Whether the last reported block left the node's best chain (then the position moved back to the fork point). */
  async #checkCanonical(): Promise<boolean> {
    const top = this.#recent.at(-1);
    if (!top) return false;
    // A batch read ahead from the block above it, whose first block's parent is this block: the
    // node had it on its best chain when that batch was read, as the batch reported next assumes.
    // Asking the node again would wait behind the read (a catch-up's step waited 20-100 ms for it
    // while the batches doubled after a reconnect); a batch that does not link asks, as before.
    const ahead = this.#ahead[0];
    if (ahead && ahead.from === top.height + 1) {
      const read = await ahead.read.catch(() => undefined);
      if (read?.blocks[0]?.parentHash === top.hash) return false;
    }
    const hash = await this.#o.source.hashAt(top.height);
    // No block at that height: the node is behind, which is not another block.
    if (hash === undefined || hash === top.hash) return false;
    return this.#rewind();
  }

  /**
   * Back to the newest reported block still on the node's best chain; the next read reports the
   * other branch from there. Nothing changes (false) when the node stops knowing a height on the way down.
   * `from`: the index of the newest recent block to check (a lower head: the one at its height);
   * every block above it left too.
   */
  async #rewind(from = this.#recent.length - 1): Promise<boolean> {
    await this.#o.confirmFork?.();
    const base = await this.#forkPoint(this.#recent, from);
    if (base === undefined) return false;
    let below = this.#recent.slice(0, base + 1);
    let orphaned = this.#recent.slice(base + 1).reverse();
    const lowest = this.#recent[0];
    if (base < 0 && lowest) {
      // Deeper than the history kept: the fork point is looked for in what the core keeps below it.
      const kept = await this.#keptForkPoint(lowest.height);
      if (kept === undefined) return false;
      below = kept.below;
      orphaned = [...orphaned, ...kept.passed];
    }
    this.#recent = below.slice(-this.#keep);
    // Deeper than every block the core keeps too: go on from the lowest of them. The core then finds
    // the fork deeper than it follows and stops the chain (or, resumed, starts its kept chain over
    // from this branch), or (a chain followed for fewer blocks than the maximum depth) replaces
    // every block it keeps.
    const top = this.#recent.at(-1);
    this.#wholeBranch = top === undefined || top.height <= this.#unreported;
    this.#forkPointUnknown = top === undefined;
    this.#height = top ? top.height : (orphaned.at(-1)?.height ?? this.#height + 1) - 1;
    if (orphaned.length > 0) this.#o.onReorg?.(orphaned);
    return true;
  }

  /**
   * Where the branches part below every block the follower keeps: the core's best chain below
   * `before` is compared with the node's a page at a time, going down, until a block is still on
   * the node's chain or the core keeps nothing lower. Returns the page up to that block (empty: none
   * is) and the blocks passed over, newest first; undefined when the node stopped knowing a height.
   * Only one page is held at a time, besides what left.
   */
  async #keptForkPoint(before: number): Promise<{ below: BlockRef[]; passed: BlockRef[] } | undefined> {
    const passed: BlockRef[] = [];
    for (let under = before; ; ) {
      const page = (await this.#o.bestBefore(under, keptPage)).filter((b) => b.height < under).sort((x, y) => x.height - y.height);
      const oldest = page[0];
      if (!oldest) return { below: [], passed };
      // A page whose oldest block left the node's chain left whole: one call, and on to the next.
      const kept = await this.#onNode(oldest);
      if (kept === undefined) return undefined;
      const base = kept ? await this.#forkPoint(page, page.length - 1, { known: 0, linear: 0 }) : -1;
      if (base === undefined) return undefined;
      passed.push(...page.slice(base + 1).reverse());
      if (base >= 0) return { below: page.slice(0, base + 1), passed };
      under = oldest.height;
    }
  }

  /**
   * The index in `blocks` (up to `from`) of the newest block still on the node's best chain, -1
   * when none is; undefined when the node stopped knowing a height. Above the fork point every
   * block differs and below it every one matches, so after the few a usual reorg takes the rest
   * is searched by halves: a fork hundreds of blocks deep costs a dozen calls, not hundreds.
   * `known`: the index of a block known to be on the node's chain (the search stays above it);
   * `linear`: how many of the newest are checked one by one first.
   */
  async #forkPoint(blocks: readonly BlockRef[], from: number, o: { known?: number; linear?: number } = {}): Promise<number | undefined> {
    const onNode = (i: number) => this.#onNode(blocks[i] as BlockRef);
    // The block at `known` is on the node's chain (-1: none is known to be).
    const known = o.known ?? -1;
    let hi = from;
    for (let steps = 0; hi > known && steps < (o.linear ?? 8); hi--, steps++) {
      const same = await onNode(hi);
      if (same === undefined) return undefined;
      if (same) return hi;
    }
    // Every block above hi differs: the fork point is in [known, hi].
    let lo = known;
    while (lo < hi) {
      const mid = Math.floor((lo + hi + 1) / 2);
      const same = await onNode(mid);
      if (same === undefined) return undefined;
      if (same) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  }

  /** Whether the node's best chain has `b` (undefined: the node knows no block at its height). */
  async #onNode(b: BlockRef): Promise<boolean | undefined> {
    const hash = await this.#o.source.hashAt(b.height);
    return hash === undefined ? undefined : hash === b.hash;
  }

  async #scan(from: number, to: number, head: number): Promise<void> {
    const next = this.#ahead.shift();
    const planned = next !== undefined && next.from === from && next.to === to;
    // Read for another plan (a head that moved, a fork): what was read ahead is dropped.
    if (!planned) this.#ahead = [];
    const read = await (planned ? next.read : this.#o.source.read(from, to));
    if (!read || read.blocks.length !== to - from + 1) return;
    const { blocks } = read;
    let parent: { hash: string } | undefined = this.#recent.at(-1);
    for (const b of blocks) {
      // The head moved back, or the chain changed under the batch: the next step sorts it out.
      if (parent && b.parentHash !== parent.hash) return;
      parent = b;
    }
    const byBlock = new Map<string, Output[]>(blocks.map((b) => [b.hash, []]));
    for (const o of read.outputs) byBlock.get(o.blockHash)?.push(o);
    const reported = blocks.map((b) => ({ ...b, outputs: (byBlock.get(b.hash) as Output[]).sort((x, y) => x.txHash.localeCompare(y.txHash) || x.outputIndex - y.outputIndex) }));
    const last = blocks.at(-1) as SourceBlock;
    this.#stride = Math.min(this.#o.source.batchBlocks, this.#stride * 2);
    // Read ahead while the core records this batch; a read that fails is thrown when it is used.
    // While the batches still double, each read is twice the report it runs beside, and the core
    // waited for it (20-120 ms a batch after a reconnect): the one after it is read too.
    const depth = this.#stride < this.#o.source.batchBlocks ? 2 : 1;
    while (this.#ahead.length < depth) {
      const last = this.#ahead.at(-1);
      const start = (last?.to ?? to) + 1;
      if (start > head) break;
      // The stride each batch will have when its step comes: doubling, up to batchBlocks.
      const stride = Math.min(this.#o.source.batchBlocks, this.#stride * 2 ** this.#ahead.length);
      const ahead = { from: start, to: Math.min(head, start + stride - 1) };
      const read = () => this.#o.source.read(ahead.from, ahead.to);
      // One read at a time, in order, as before: a source may keep what each read found (bitcoin's header chain).
      const pending = last ? last.read.catch(() => undefined).then(read) : read();
      pending.catch(() => undefined);
      this.#ahead.push({ ...ahead, read: pending });
    }
    await this.#o.core.report(reported, { height: head, time: to === head ? last.time : undefined }, this.#forkPointUnknown ? { forkPointUnknown: true } : undefined);
    for (const b of reported) {
      this.#recent.push({ height: b.height, hash: b.hash });
      this.#o.onBlock?.(b, head);
      for (const o of b.outputs) this.#o.onOutput?.(o);
    }
    if (this.#recent.length > this.#keep) this.#recent.splice(0, this.#recent.length - this.#keep);
    this.#height = to;
    this.#wholeBranch = false;
    this.#forkPointUnknown = false;
  }
}
