import { formatUnits } from "viem";
import { bitcoinScript } from "../addresses/formats.ts";
import type { AssetInfo } from "../vocabulary/assets.ts";
import { checkWitnessCommitment, parseBlock, parseTransaction, type ParsedBlock, type ParsedTx, type TxInput } from "./bitcoin-bytes.ts";
import { checkHeader, checkTransactions, mainnetNextBits, mainnetPowLimit, merkleRoot, parseBits, retargetInterval, type HeaderFields } from "./bitcoin-checks.ts";
import type { BitcoinNode } from "./bitcoin-node.ts";
import { BlockRefused } from "./block-refused.ts";
import type { ChainSource, Output } from "./follow.ts";
import { allSettled, readInParts } from "./read-parts.ts";
import type { WatchedAddresses } from "./watched.ts";

/**
 * Watched addresses by the output script each stands for: an output names no address, and the
 * same script is written bc1…, tb1… or bcrt1… depending on the network the node follows.
 */
export class BitcoinWatched implements WatchedAddresses {
  readonly #byScript = new Map<string, string>();
  add(address: string): void {
    const script = bitcoinScript(address);
    if (script !== undefined) this.#byScript.set(script, address);
  }
  clear(): void {
    this.#byScript.clear();
  }
  /** The watched address an output script pays, if any. */
  addressOf(scriptHex: string): string | undefined {
    return this.#byScript.get(scriptHex.toLowerCase());
  }
  get size(): number {
    return this.#byScript.size;
  }
}

/**
 * Bitcoin as the follower reads it, through Bitcoin Core's RPC: each block by height
 * (`getblockhash`) and then its bytes (`getblock <hash> 0`), every output of every transaction
 * (the coinbase's too) matched by its script. An output is a payment whether or not it is spent
 * later: the service receives, it does not keep a wallet. Each block read is shown to `sawBlocks`
 * (the mempool reader, which looks in it for spends that conflict with payments it saw).
 *
 * Nothing of a block is believed before it is checked: its bytes must hash to the hash the node
 * named at that height, every txid is computed from the transaction's bytes and the amounts and
 * scripts counted are parsed from the same bytes (bitcoin-bytes.ts), and then blockChecks. A block
 * that fails is a BlockRefused, and the read fails whole (the caller retries it with backoff).
 *
 * The node's `chainwork` is not passed on: it is the node's word, and a node that inflated it
 * would make the core take its branch. The core compares bitcoin branches by height, each block's
 * proof of work checked here (and on Live its bits by mainnet's rule), so a longer branch is one
 * somebody mined (docs/payments.md, "Bitcoin").
 */
export function bitcoinSource(
  node: BitcoinNode,
  asset: AssetInfo,
  watched: BitcoinWatched,
  o: { rules: "mainnet" | "test"; sawBlocks?: (blocks: readonly ParsedBlock[]) => void },
): ChainSource {
  const check = blockChecks(node, o.rules);
  return {
    // Mainnet blocks are up to ~4 MB (8 MB of hex): a few at a time.
    batchBlocks: 4,
    headHeight: () => node.headHeight(),
    async hashAt(height) {
      return (await node.hashAt(height))?.toLowerCase();
    },
    async read(from, to) {
      const heights = Array.from({ length: to - from + 1 }, (_, i) => from + i);
      const hashes = await Promise.all(heights.map((h) => node.hashAt(h)));
      if (hashes.some((h) => h === undefined)) return undefined;
      // A failed read of several blocks (a timeout, the node's work queue full) is tried again in
      // halves, down to one block at a time; a block that cannot be read on its own is named.
      const raw = await readInParts(from, to, async (f, t) => {
        const part = await allSettled((hashes as string[]).slice(f - from, t - from + 1).map((h) => node.block(h)));
        return part.some((b) => b === undefined) ? undefined : (part as string[]);
      }, () => true);
      if (!raw) return undefined;
      const blocks = raw.map((hex, i) => {
        const asked = { height: from + i, hash: (hashes[i] as string).toLowerCase() };
        const b = parseBlock(hex, asked);
        if (b.hash !== asked.hash) throw new BlockRefused("header", asked, `its bytes hash to ${b.hash}, not the hash the node named at height ${asked.height}`);
        return b;
      });
      await check(blocks);
      o.sawBlocks?.(blocks);
      const outputs: Output[] = [];
      for (const b of blocks) {
        for (const tx of b.tx) {
          for (const out of tx.outputs) {
            const toAddress = watched.addressOf(out.script);
            if (toAddress === undefined) continue;
            outputs.push({
              asset: asset.asset,
              toAddress,
              txHash: tx.txid,
              outputIndex: out.n,
              amount: formatUnits(out.value, asset.decimals),
              blockHeight: b.height,
              blockHash: b.hash,
              blockTime: b.time,
            });
          }
        }
      }
      return {
        blocks: blocks.map((b) => ({ height: b.height, hash: b.hash, parentHash: b.previousblockhash, time: b.time })),
        outputs,
      };
    },
  };
}

/** Headers kept for the target rule: the parent of the next block read is among them but after a restart or a fork. */
const headersKept = 64;

/**
 * Checks each block read, in order, before anything of it is believed: its header fields hash to
 * the hash the node named and that hash meets the target of its bits; its transactions' merkle
 * root is its header's, no txid twice. On mainnet (Live: the node proved it serves mainnet) its
 * bits must also be what the chain's rules give it (mainnetNextBits): its parent's, or at a
 * retarget height the parent's target scaled by the period's time. The parent's header is the
 * block read before it; only when it was not read here (the first read after a start or a fork)
 * is it asked for (`getblockheader`, one call), and at a retarget height the period's first block
 * (`getblockhash`, `getblockheader`: two calls every 2016 blocks). Test networks keep their own
 * difficulty rules (testnet3's 20-minute minimum-difficulty blocks, testnet4, signet, regtest):
 * only the proof of work and the merkle root are checked there, and no call is made.
 */
function blockChecks(node: BitcoinNode, rules: "mainnet" | "test"): (blocks: readonly ParsedBlock[]) => Promise<void> {
  const powLimit = rules === "mainnet" ? mainnetPowLimit : undefined;
  const known = new Map<string, { height: number; bits: number; time: number }>();
  const facts = (h: HeaderFields) => ({ height: h.height, bits: parseBits(h.bits) as number, time: h.time });
  const keep = (h: HeaderFields) => {
    known.set(h.hash.toLowerCase(), facts(h));
    for (const oldest of known.keys()) {
      if (known.size <= headersKept) break;
      known.delete(oldest);
    }
  };
  /** A header the node serves by hash, checked on its own (its hash, its proof of work). */
  const header = async (hash: string, what: string): Promise<HeaderFields> => {
    const h = await node.header(hash);
    if (!h) throw new Error(`getblockheader: the node does not know ${what} ${hash}`);
    if (String(h.hash).toLowerCase() !== hash.toLowerCase()) throw new BlockRefused("header", h, `the node answered it for ${what} ${hash}`);
    checkHeader(h, powLimit);
    return h;
  };
  return async (blocks) => {
    for (const b of blocks) {
      checkHeader(b, powLimit);
      checkTransactions(b);
      checkWitnessCommitment(b, merkleRoot);
      if (rules === "mainnet" && b.height > 0) {
        const prev = String(b.previousblockhash).toLowerCase();
        const parent = known.get(prev) ?? facts(await header(prev, `the parent of block ${b.height}`));
        if (parent.height !== b.height - 1) throw new BlockRefused("target", b, `its parent ${prev} is at height ${parent.height}`);
        let periodStart: number | undefined;
        if (b.height % retargetInterval === 0) {
          const first = await node.hashAt(b.height - retargetInterval);
          if (first === undefined) throw new Error(`getblockhash ${b.height - retargetInterval}: the node has no block there`);
          periodStart = (await header(first, `block ${b.height - retargetInterval}`)).time;
        }
        const expected = mainnetNextBits(b.height, parent, periodStart);
        if (parseBits(b.bits) !== expected) {
          throw new BlockRefused("target", b, `bits ${b.bits}, where mainnet's rules give ${expected.toString(16).padStart(8, "0")}`);
        }
      }
      keep(b);
    }
  };
}

/** An output of a mempool transaction to a watched address: a block output's facts without the block. */
export interface MempoolOutput extends Pick<Output, "asset" | "toAddress" | "txHash" | "outputIndex" | "amount"> {
  /** The transaction signals replace-by-fee (BIP 125: an input's nSequence below 0xfffffffe). */
  replaceable: boolean;
}

/** What a mempool read found: the node's best block when it was read, the watched outputs in it, and the payments conflicted. */
export interface MempoolSnapshot {
  tip: { height: number; hash: string };
  outputs: MempoolOutput[];
  /**
   * Transactions with an output to a watched address, read in the mempool before, that are no
   * longer in it and whose input another transaction spent (seen in the mempool or in a block
   * read): they cannot be mined on this chain any more.
   */
  conflicted: string[];
}

/** A transaction's outputs as kept between polls: their scripts and amounts, matched anew each poll (an address may be watched after its payment was first read). */
interface KeptTx {
  replaceable: boolean;
  vout: { n: number; script: string; amount: string }[];
  /** The outputs it spends (txid:vout). */
  inputs: string[];
}

/** Transactions new to the mempool read per poll (the rest the next polls): a node's first mempool may hold 100 000. */
const newPerPoll = 1000;
const parallelReads = 8;
/** Payments that left the mempool unmined, remembered for a conflicting spend seen later (a failover to a node that has it instead). */
const goneKept = 10_000;

/** BIP 125's explicit signal: any input whose nSequence is below 0xfffffffe. */
export function signalsReplaceByFee(tx: Pick<ParsedTx, "inputs">): boolean {
  return tx.inputs.some((i) => i.sequence < 0xfffffffe);
}

/** A coinbase's one input spends no output: its txid is all zeros. */
const nothing = "00".repeat(32);

/** The outputs a transaction spends, as txid:vout (a coinbase spends none). */
function spentBy(inputs: readonly TxInput[]): string[] {
  return inputs.flatMap((i) => (i.txid === nothing ? [] : [`${i.txid}:${i.vout}`]));
}

/**
 * The node's mempool as the watcher reads it, through Bitcoin Core's documented RPC: whether it
 * is loaded (`getmempoolinfo`), the txids (`getrawmempool`), and each new one once
 * (`getrawtransaction <txid> 1`, which serves mempool transactions without txindex); transactions
 * that left are forgotten, but for payments (a watched output), whose inputs are kept a while so
 * that a spend of one by another transaction names them conflicted. The tip is read after the
 * txids: a snapshot whose tip is the core's saw no block the core was not told of.
 */
export class BitcoinMempool {
  readonly #node: BitcoinNode;
  readonly #asset: AssetInfo;
  readonly #watched: BitcoinWatched;
  readonly #kept = new Map<string, KeptTx>();
  /** Payments that left the mempool unmined: their inputs, oldest first. */
  readonly #gone = new Map<string, string[]>();
  /** Each output spent by a kept or gone transaction (txid:vout) → that transaction. */
  readonly #spender = new Map<string, string>();
  /** Kept or gone transactions another transaction conflicts with. */
  readonly #conflicts = new Set<string>();
  #pending = 0;
  #size = 0;

  constructor(node: BitcoinNode, asset: AssetInfo, watched: BitcoinWatched) {
    this.#node = node;
    this.#asset = asset;
    this.#watched = watched;
  }

  /**
   * The watched outputs in the node's mempool, and the payments conflicted; undefined when the node
   * says its mempool is not loaded (asked before and after the txids: a node restarted between the
   * two answers an empty mempool), which is then not read at all.
   */
  async read(): Promise<MempoolSnapshot | undefined> {
    if (!(await this.#node.mempoolLoaded())) return undefined;
    const txids = (await this.#node.mempool()).map((t) => t.toLowerCase());
    if (!(await this.#node.mempoolLoaded())) return undefined;
    const now = new Set(txids);
    this.#size = now.size;
    for (const [txid, tx] of this.#kept) if (!now.has(txid)) this.#leave(txid, tx);
    const fresh = txids.filter((t) => !this.#kept.has(t)).slice(0, newPerPoll);
    for (let i = 0; i < fresh.length; i += parallelReads) {
      const part = fresh.slice(i, i + parallelReads);
      const txs = await Promise.all(part.map((t) => this.#node.transaction(t)));
      txs.forEach((hex, j) => {
        const txid = part[j] as string;
        // Gone meanwhile (mined, replaced): not in the mempool any more.
        if (hex === undefined) return now.delete(txid);
        // Its bytes must hash to the txid asked for: the outputs kept are parsed from them.
        const tx = parseTransaction(hex);
        if (tx.txid !== txid) throw new Error(`getrawtransaction ${txid}: the node answered a transaction whose bytes hash to ${tx.txid}`);
        this.#keep(txid, tx);
      });
    }
    this.#pending = [...now].filter((t) => !this.#kept.has(t)).length;
    const height = await this.#node.headHeight();
    const hash = (await this.#node.hashAt(height))?.toLowerCase() ?? "";
    const outputs: MempoolOutput[] = [];
    for (const [txid, tx] of this.#kept) {
      for (const o of tx.vout) {
        const toAddress = this.#watched.addressOf(o.script);
        if (toAddress !== undefined) outputs.push({ asset: this.#asset.asset, toAddress, txHash: txid, outputIndex: o.n, amount: o.amount, replaceable: tx.replaceable });
      }
    }
    outputs.sort((x, y) => x.txHash.localeCompare(y.txHash) || x.outputIndex - y.outputIndex);
    const conflicted = [...this.#conflicts].filter((t) => this.#gone.has(t)).sort();
    return { tip: { height, hash }, outputs, conflicted };
  }

  /** Blocks the follower read: a transaction in one spending what a kept or gone one spends conflicts with it; a gone one mined there was not conflicted. */
  sawBlocks(blocks: readonly ParsedBlock[]): void {
    for (const b of blocks) {
      for (const tx of b.tx) {
        const gone = this.#gone.get(tx.txid);
        if (gone) this.#forget(tx.txid, gone);
        this.#spends(tx.txid, spentBy(tx.inputs));
      }
    }
  }

  /** A transaction read in the mempool: kept; a payment gone before and back (a reorg, a rebroadcast) is no longer gone. */
  #keep(txid: string, tx: ParsedTx): void {
    const gone = this.#gone.get(txid);
    if (gone) this.#forget(txid, gone);
    const inputs = spentBy(tx.inputs);
    this.#spends(txid, inputs);
    this.#kept.set(txid, {
      replaceable: signalsReplaceByFee(tx),
      vout: tx.outputs.map((o) => ({ n: o.n, script: o.script, amount: formatUnits(o.value, this.#asset.decimals) })),
      inputs,
    });
    for (const o of inputs) this.#spender.set(o, txid);
  }

  /** `txid` spends `inputs`: any other kept or gone transaction spending one of them conflicts with it. */
  #spends(txid: string, inputs: readonly string[]): void {
    for (const o of inputs) {
      const other = this.#spender.get(o);
      if (other !== undefined && other !== txid) this.#conflicts.add(other);
    }
  }

  /** A kept transaction no longer in the mempool: remembered (a while) if it pays a watched address, else forgotten. */
  #leave(txid: string, tx: KeptTx): void {
    this.#kept.delete(txid);
    if (!tx.vout.some((o) => this.#watched.addressOf(o.script) !== undefined)) return this.#forget(txid, tx.inputs);
    this.#gone.set(txid, tx.inputs);
    for (const [oldest, inputs] of this.#gone) {
      if (this.#gone.size <= goneKept) break;
      this.#forget(oldest, inputs);
    }
  }

  #forget(txid: string, inputs: readonly string[]): void {
    this.#gone.delete(txid);
    this.#conflicts.delete(txid);
    for (const o of inputs) if (this.#spender.get(o) === txid) this.#spender.delete(o);
  }

  /**
   * Whether every transaction in the node's mempool at the last read was read (a first read of a
   * large mempool takes several polls): only a complete snapshot is reported, since what it lacks
   * the core counts as missing.
   */
  get complete(): boolean {
    return this.#pending === 0;
  }

  /** Transactions in the node's mempool at the last read. */
  get size(): number {
    return this.#size;
  }
}
