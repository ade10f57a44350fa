/** A block the watcher processed. */
export interface BlockRef {
  height: number;
  hash: string;
}

/** One output to a watched address, as reported to ObservationService. */
export interface Output {
  asset: string;
  /** The watched address as the core handed it out. */
  toAddress: string;
  txHash: string;
  /** Unique within the transaction: a bitcoin output's index; on EVM chains 0 for the transaction's own value, 1 + the log's index for a token Transfer. */
  outputIndex: number;
  amount: string;
  blockHeight: number;
  blockHash: string;
  blockTime: number;
}

interface Pending {
  output: Output;
  confirmations: number;
  /** What the core said it needs to count (its intent's policy). */
  required: number;
  /** When it was last reported (ms since the epoch). */
  reportedAt: number;
}

/** What the follower asks of the core (ChainService and ObservationService, over gRPC or in-process). */
export interface Core {
  /** Reports an output; the core answers with the confirmations it needs to count (0: it matched no intent, nothing more to report). */
  record(output: Output, confirmations: number): Promise<number>;
  reorg(orphanedBlockHashes: readonly string[]): Promise<void>;
  save(position: { height: number; recentBlocks: BlockRef[] }, head: { height: number; time: number | undefined }): Promise<void>;
}

/** A block as a source read it. */
export interface SourceBlock {
  height: number;
  hash: string;
  parentHash: string;
  /** Seconds since the epoch. */
  time: number;
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

export interface FollowerOptions {
  source: ChainSource;
  core: Core;
  /** The most confirmations an output of each asset can need (from ClaimChain): how far back a restart reports again and a reorg is looked for. */
  required: Readonly<Record<string, number>>;
  /** Outputs recorded at once. */
  concurrency?: number;
  /** Outputs short of their threshold whose growing confirmations are reported per step (default 100). */
  progressPerStep?: number;
  /** Told of each block processed and each output reported. */
  onBlock?: (block: SourceBlock, head: number) => void;
  onOutput?: (output: Output) => void;
  onReorg?: (orphaned: BlockRef[]) => void;
  /**
   * Called before blocks are reported as having left the best chain: throws when the node no
   * longer serves the chain they were read from (reset, replaced), which is no reorg.
   */
  confirmFork?: () => Promise<void>;
}

/**
 * Follows one chain from a saved position: each new block's outputs to watched addresses
 * (as its source finds them) are reported, and reported again as their confirmations
 * grow until their asset's threshold; a block that leaves the best chain (told by block and
 * parent hashes, not by the node's removed logs) is reported as a reorg and its height
 * processed again. The caller saves the position after each step, so a restart repeats at
 * most one step: the core records an output once however often it is reported.
 */
export class Follower {
  readonly #o: FollowerOptions;
  #required: Readonly<Record<string, number>>;
  #keep: number;
  #height: number;
  #recent: BlockRef[];
  /** Outputs below their threshold, by block: reported again as the head moves. */
  #pending: Pending[] = [];

  constructor(o: FollowerOptions, position: { height: number; recentBlocks: BlockRef[] }) {
    this.#o = o;
    this.#required = o.required;
    this.#keep = keepFor(o.required);
    this.#height = position.height;
    this.#recent = [...position.recentBlocks];
  }

  /** The core's newest word on the most confirmations an output can need (a merchant raised a rule): history is kept that deep from now on. */
  setRequired(required: Readonly<Record<string, number>>): void {
    this.#required = required;
    this.#keep = keepFor(required);
  }

  get position(): { height: number; recentBlocks: BlockRef[] } {
    return { height: this.#height, recentBlocks: [...this.#recent] };
  }

  /**
   * After taking over (a restart, or another watcher's lease): checks the saved blocks are
   * still the best chain, then reports again the outputs of the blocks still below a threshold,
   * so their confirmations keep being reported.
   */
  async resume(head: number): Promise<void> {
    await this.#checkCanonical();
    const maxRequired = Math.max(1, ...Object.values(this.#required));
    const from = Math.max(this.#height - maxRequired + 1, this.#recent[0]?.height ?? this.#height + 1, 0);
    // A batch at a time: a deep count (a merchant's rule) must not become one huge read.
    for (let start = from; start <= this.#height; start += this.#o.source.batchBlocks) {
      await this.#scan(start, Math.min(this.#height, start + this.#o.source.batchBlocks - 1), head, false);
    }
  }

  /** One step towards `head`: at most batchBlocks blocks; false when there was nothing to do. */
  async step(head: number): Promise<boolean> {
    // A node behind what was processed has nothing new to tell, and no say on what it has not seen.
    if (head < this.#height) return false;
    if (await this.#checkCanonical()) return true;
    if (head <= this.#height) {
      await this.#reportPending(head);
      return false;
    }
    const to = Math.min(head, this.#height + this.#o.source.batchBlocks);
    await this.#scan(this.#height + 1, to, head, true);
    return true;
  }

  /** Whether the last processed block left the best chain (then it was handled: the position moved back). */
  async #checkCanonical(): Promise<boolean> {
    const top = this.#recent.at(-1);
    if (!top) return false;
    const hash = await this.#o.source.hashAt(top.height);
    // No block at that height: the node is behind, which is not another block.
    if (hash === undefined || hash === top.hash) return false;
    return this.#rewind();
  }

  /**
   * Back to the newest saved block still on the best chain; the ones above it are reported
   * orphaned. Nothing changes (false) when the node stops knowing a height on the way down.
   */
  async #rewind(): Promise<boolean> {
    await this.#o.confirmFork?.();
    const orphaned: BlockRef[] = [];
    for (let i = this.#recent.length - 1; i >= 0; i--) {
      const b = this.#recent[i] as BlockRef;
      const hash = await this.#o.source.hashAt(b.height);
      if (hash === undefined) return false;
      if (hash === b.hash) break;
      orphaned.push(b);
    }
    this.#recent.splice(this.#recent.length - orphaned.length);
    // Deeper than the history kept: everything kept is gone; go on from below it.
    const base = this.#recent.at(-1);
    this.#height = base ? base.height : (orphaned.at(-1)?.height ?? this.#height + 1) - 1;
    if (orphaned.length > 0) {
      const gone = new Set(orphaned.map((b) => b.hash));
      await this.#o.core.reorg(orphaned.map((b) => b.hash));
      this.#pending = this.#pending.filter((p) => !gone.has(p.output.blockHash));
      this.#o.onReorg?.(orphaned);
    }
    await this.#o.core.save(this.position, { height: this.#height, time: undefined });
    return true;
  }

  async #scan(from: number, to: number, head: number, advance: boolean): Promise<void> {
    const read = await this.#o.source.read(from, to);
    if (!read || read.blocks.length !== to - from + 1) return;
    const { blocks } = read;
    let parent = advance ? this.#recent.at(-1) : undefined;
    for (const b of blocks) {
      // The head moved back, or the chain changed under the batch: the next step sorts it out.
      if (parent && b.parentHash !== parent.hash) return;
      parent = b;
    }
    const found = [...read.outputs];
    found.sort((a, b) => a.blockHeight - b.blockHeight || a.outputIndex - b.outputIndex);
    // Outputs are independent (the core serialises those of one intent on its row lock), so
    // several are recorded at once; the position is saved only once all of them are.
    await inParallel(found, this.#o.concurrency ?? 16, async (output) => {
      const confirmations = head - output.blockHeight + 1;
      const required = await this.#o.core.record(output, confirmations);
      this.#o.onOutput?.(output);
      if (confirmations < required) this.#pending.push({ output, confirmations, required, reportedAt: Date.now() });
    });
    if (advance) {
      for (const b of blocks) {
        this.#recent.push({ height: b.height, hash: b.hash });
        this.#o.onBlock?.(b, head);
      }
      if (this.#recent.length > this.#keep) this.#recent.splice(0, this.#recent.length - this.#keep);
      this.#height = to;
    }
    await this.#reportPending(head);
    const last = blocks.at(-1) as SourceBlock;
    await this.#o.core.save(this.position, { height: head, time: to === head ? last.time : undefined });
  }

  /**
   * Outputs whose confirmations grew since they were reported, reported again; those at their
   * threshold are done. Reaching the threshold is always reported (that is when an output counts);
   * growth short of it at most for `progressPerStep` outputs a step, those reported longest ago
   * first, so a backlog of pending outputs cannot hold up the next block.
   */
  async #reportPending(head: number): Promise<void> {
    const grown = this.#pending.filter((p) => head - p.output.blockHeight + 1 > p.confirmations);
    const reaching = grown.filter((p) => head - p.output.blockHeight + 1 >= p.required);
    const progress = grown
      .filter((p) => !reaching.includes(p))
      .sort((a, b) => a.reportedAt - b.reportedAt)
      .slice(0, this.#o.progressPerStep ?? 100);
    await inParallel([...reaching, ...progress], this.#o.concurrency ?? 16, async (p) => {
      const confirmations = head - p.output.blockHeight + 1;
      p.required = await this.#o.core.record(p.output, confirmations);
      p.confirmations = confirmations;
      p.reportedAt = Date.now();
    });
    this.#pending = this.#pending.filter((p) => p.confirmations < p.required);
  }
}

/** Enough history to find where a reorg as deep as the deepest count forked, and some (ChainService keeps at most 1 024). */
function keepFor(required: Readonly<Record<string, number>>): number {
  return Math.min(1024, 2 * Math.max(1, ...Object.values(required)) + 16);
}

/** Runs `fn` on every item, at most `limit` at a time; the first failure is thrown once all have settled. */
async function inParallel<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  let failure: unknown;
  const lane = async () => {
    while (next < items.length) {
      const item = items[next++] as T;
      try {
        await fn(item);
      } catch (err) {
        failure ??= err;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
  if (failure !== undefined) throw failure;
}
