import { parseHeader } from "./bitcoin-bytes.ts";
import { checkProofOfWork, compactTarget, mainnetNextBits, mainnetPowLimit, retargetInterval } from "./bitcoin-checks.ts";
import type { BitcoinNode } from "./bitcoin-node.ts";
import { BlockRefused } from "./block-refused.ts";

/**
 * The header chain a bitcoin watcher keeps: every header from a block whose hash is compiled in
 * (a checkpoint) up to the highest block read, each read from its 80 bytes, hashed here, linked
 * to the one below by hash and meeting its own target; on mainnet each one's bits are also the
 * ones the retarget rule gives it. The work of each header is summed here from its bits
 * (GetBlockProof), never taken from the node, and handed to the core as the block's chainwork.
 *
 * So a block a Live watcher reads carries mainnet's work, proven here: a node can only serve a
 * chain that passes through the checkpoint, and every header above it costs the work its bits
 * say, which the retarget rule keeps within 4× of the real chain's per two weeks. A node that
 * invents a branch must mine it.
 */

/** A block the chain must pass through: its height and hash, compiled in. */
export interface Checkpoint {
  height: number;
  hash: string;
  /** Where the height and hash come from (named in errors and docs). */
  source: string;
}

/**
 * Mainnet's checkpoint: block 910,000, the newest assumeutxo block of Bitcoin Core 30.0
 * (`src/kernel/chainparams.cpp`, `CMainParams`, `m_assumeutxo_data`). The work the core compares
 * Live bitcoin branches by is the work above this block; a later release may add a newer block
 * to pass through, but this one stays the base of the work, so works kept before and after an
 * upgrade compare.
 */
export const mainnetCheckpoint: Checkpoint = {
  height: 910_000,
  hash: "0000000000000000000108970acb9522ffd516eae17acddcb1bd16469194a821",
  source: "Bitcoin Core 30.0's assumeutxo block",
};

/** Regtest's block 0 (Bitcoin Core's and bcoin's alike): a local chain's headers are kept from it. */
export const regtestGenesis: Checkpoint = {
  height: 0,
  hash: "0f9188f13cb7b2c71f2a335e3a4fc328bf5beb436012afca590b1a11466e2206",
  source: "regtest's block 0",
};

/** Heights asked of the node per JSON-RPC batch: about 100 KB of answer. */
const perBatch = 1000;

interface Kept {
  hash: string;
  bits: number;
  time: number;
  /** The work of the blocks above the checkpoint up to this one (0 at the checkpoint and below). */
  work: bigint;
}

/** The work a header's target stands for (GetBlockProof): 2^256 / (target + 1). */
export function blockWork(bits: number): bigint {
  return (1n << 256n) / (compactTarget(bits) + 1n);
}

export class HeaderChain {
  readonly #node: BitcoinNode;
  readonly #checkpoint: Checkpoint;
  readonly #mainnet: boolean;
  /** Kept headers from #first up. */
  #kept: Kept[] = [];
  readonly #first: number;

  /**
   * `rules` "mainnet" checks each header's bits by mainnet's retarget rule (and keeps headers from
   * the checkpoint's retarget period's first block, whose time the first retarget above needs);
   * "test" (regtest: no retargets) checks each header's proof of work against its own bits.
   */
  constructor(node: BitcoinNode, checkpoint: Checkpoint, rules: "mainnet" | "test") {
    this.#node = node;
    this.#checkpoint = checkpoint;
    this.#mainnet = rules === "mainnet";
    this.#first = this.#mainnet ? checkpoint.height - (checkpoint.height % retargetInterval) : checkpoint.height;
  }

  get checkpoint(): Checkpoint {
    return this.#checkpoint;
  }

  /** The highest header kept, -1 before the first read. */
  get tip(): number {
    return this.#first + this.#kept.length - 1;
  }

  #at(height: number): Kept | undefined {
    return height < this.#first ? undefined : this.#kept[height - this.#first];
  }

  /** The work above the checkpoint up to the kept block at `height`. */
  workAt(height: number): bigint {
    const k = this.#at(height);
    if (!k) throw new RangeError(`no header kept at ${height}`);
    return k.work;
  }

  /**
   * The hashes of the node's best chain at from..to, each a header kept here (read, linked,
   * checked); undefined when the node has no block at `to` or its best chain changed while it
   * was read (the caller reads again). A chain that does not pass through the checkpoint, or a
   * header that fails a check, is a BlockRefused.
   */
  async hashes(from: number, to: number): Promise<string[] | undefined> {
    if (from <= this.#checkpoint.height) {
      throw new Error(`block ${from} is at or below ${this.#checkpoint.source} (${this.#checkpoint.height}): this chain is followed from above it`);
    }
    // One batch names the blocks read and the one below them (the kept tip, on a read that goes on
    // from it): extending and finding a fork use these hashes, not another call for them.
    const heights = range(from - 1, to);
    const named = new Map((await this.#hashesAt(heights)).map((h, i) => [heights[i] as number, h]));
    const top = named.get(to);
    if (heights.some((h) => named.get(h) === undefined)) return undefined;
    if (this.#at(to)?.hash !== top) {
      await this.#leaveForkedOff(Math.min(this.tip, to), named);
      if (!(await this.#extend(to, top as string, named))) return undefined;
    }
    const kept = range(from, to).map((h) => this.#at(h)?.hash);
    return kept.every((h, i) => h === named.get(from + i)) ? (kept as string[]) : undefined;
  }

  async #hashesAt(heights: readonly number[]): Promise<(string | undefined)[]> {
    const out: (string | undefined)[] = [];
    for (let i = 0; i < heights.length; i += perBatch) out.push(...(await this.#node.hashesAt(heights.slice(i, i + perBatch))).map((h) => h?.toLowerCase()));
    return out;
  }

  /**
   * Kept headers the node's best chain no longer has, from `below` down, leave (none below the
   * checkpoint can). `known`: hashes the node just named, asked for no more.
   */
  async #leaveForkedOff(below: number, known: ReadonlyMap<number, string | undefined>): Promise<void> {
    let h = below;
    // The kept tip first (most reads only extend the chain: its hash is known), then 64 heights a batch.
    let step = 1;
    while (h >= this.#checkpoint.height && h >= this.#first) {
      const heights = range(Math.max(this.#checkpoint.height, h - step + 1), h).reverse();
      step = 64;
      const named = heights.every((x) => known.has(x)) ? heights.map((x) => known.get(x)) : await this.#hashesAt(heights);
      const same = heights.findIndex((x, i) => named[i] !== undefined && named[i] === this.#at(x)?.hash);
      if (same >= 0) {
        this.#kept.length = (heights[same] as number) - this.#first + 1;
        return;
      }
      h = (heights.at(-1) as number) - 1;
    }
    if (this.#kept.length > 0) {
      this.#kept = [];
      const at = await this.#hashesAt([this.#checkpoint.height]);
      throw new BlockRefused("checkpoint", { height: this.#checkpoint.height, hash: at[0] ?? "none" }, `the node's best chain does not pass through ${this.#checkpoint.source} ${this.#checkpoint.hash}`);
    }
  }

  /**
   * Headers read from the node up to `to`, each checked; false when the node's chain moved meanwhile
   * (its header at `to` is not `top`). `known`: hashes the node just named, asked for no more.
   */
  async #extend(to: number, top: string, known: ReadonlyMap<number, string | undefined>): Promise<boolean> {
    while (this.tip < to) {
      const heights = range(this.tip + 1, Math.min(to, this.tip + perBatch));
      const hashes = heights.every((x) => known.has(x)) ? heights.map((x) => known.get(x)) : await this.#node.hashesAt(heights);
      const past = hashes.findIndex((h) => h === undefined);
      const asked = (past < 0 ? hashes : hashes.slice(0, past)).map((h) => (h as string).toLowerCase());
      if (asked.length === 0) return false;
      const raw = await this.#node.rawHeaders(asked);
      for (let i = 0; i < asked.length; i++) {
        const height = heights[i] as number;
        const ref = { height, hash: asked[i] as string };
        if (raw[i] === undefined) return false;
        const h = parseHeader(raw[i], ref);
        if (h.hash !== ref.hash) throw new BlockRefused("header", ref, `its header's bytes hash to ${h.hash}, not the hash the node named at height ${height}`);
        const parent = this.#at(height - 1);
        // A parent that is not the kept one: the node's chain moved between two batches.
        if (parent && h.previous !== parent.hash) return false;
        this.#check(ref, h, parent);
        const below = height <= this.#checkpoint.height;
        if (height === this.#checkpoint.height && h.hash !== this.#checkpoint.hash) {
          this.#kept = [];
          throw new BlockRefused("checkpoint", ref, `it is not ${this.#checkpoint.source} ${this.#checkpoint.hash}`);
        }
        this.#kept.push({ hash: h.hash, bits: h.bits, time: h.time, work: below ? 0n : (parent?.work ?? 0n) + blockWork(h.bits) });
      }
      if (past >= 0) return false;
    }
    return this.#at(to)?.hash === top;
  }

  /**
   * A header above the checkpoint: its proof of work (its hash at most its target, the target at
   * most mainnet's limit), and on mainnet its bits as the retarget rule gives them from its parent
   * (and at a retarget, the period's first block). Headers at and below the checkpoint are the
   * checkpoint and its ancestors, tied to the compiled-in hash by their hashes: nothing else of
   * them is checked (the first retarget above needs the time of the period's first block).
   */
  #check(ref: { height: number; hash: string }, h: { hash: string; time: number; bits: number }, parent: Kept | undefined): void {
    if (ref.height <= this.#checkpoint.height) return;
    checkProofOfWork(ref, h.bits, this.#mainnet ? mainnetPowLimit : undefined);
    if (!this.#mainnet || !parent) return;
    const periodStart = ref.height % retargetInterval === 0 ? this.#at(ref.height - retargetInterval)?.time : undefined;
    const expected = mainnetNextBits(ref.height, parent, periodStart);
    if (h.bits !== expected) throw new BlockRefused("target", ref, `bits ${hex8(h.bits)}, where mainnet's rules give ${hex8(expected)}`);
  }
}

const hex8 = (bits: number): string => bits.toString(16).padStart(8, "0");

function range(from: number, to: number): number[] {
  return Array.from({ length: Math.max(0, to - from + 1) }, (_, i) => from + i);
}
