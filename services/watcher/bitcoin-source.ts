import { formatUnits } from "viem";
import { bitcoinScript } from "../addresses/formats.ts";
import type { AssetInfo } from "../vocabulary/assets.ts";
import { checkWitnessCommitment, parseBlock, parseTransaction, type ParsedBlock, type ParsedTx, type TxInput } from "./bitcoin-bytes.ts";
import { checkHeader, checkTransactions, mainnetPowLimit, merkleRoot } from "./bitcoin-checks.ts";
import { HeaderChain, mainnetCheckpoint, regtestGenesis, type Checkpoint } from "./bitcoin-headers.ts";
import type { BitcoinNode } from "./bitcoin-node.ts";
import { BlockRefused } from "./block-refused.ts";
import type { ChainSource, Output } from "./follow.ts";
import { allSettled, readInParts } from "./read-parts.ts";
import type { WatchedAddresses } from "./watched.ts";

/** The most transaction bytes one read of blocks reports (see the read's rawBudget). */
export const maxRawBytesPerRead = 256 * 1024;

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
 * scripts counted are parsed from the same bytes (bitcoin-bytes.ts), its proof of work, merkle
 * root and witness commitment must hold. A block that fails is a BlockRefused, and the read fails
 * whole (the caller retries it with backoff).
 *
 * On mainnet (Live: the node proved it serves mainnet) and regtest, the hash asked for at each
 * height is one of the watcher's own header chain (bitcoin-headers.ts): linked by hash down to a
 * compiled-in checkpoint (regtest: its block 0), each header's bits by mainnet's retarget rule,
 * and each block's chainwork summed there from the headers' bits. The node's own `chainwork` is
 * never taken. Other test networks (testnet3, testnet4, signet) keep their own difficulty rules
 * and are not followed from a checkpoint: their blocks' proof of work is checked against their
 * own bits, and the core compares their branches by height (docs/payments.md, "Bitcoin").
 */
export function bitcoinSource(
  node: BitcoinNode,
  asset: AssetInfo,
  watched: BitcoinWatched,
  o: { rules: "mainnet" | "test"; sawBlocks?: (blocks: readonly ParsedBlock[]) => void; checkpoint?: Checkpoint },
): ChainSource {
  const powLimit = o.rules === "mainnet" ? mainnetPowLimit : undefined;
  const chain = headerChainOf(node, o.rules, o.checkpoint);
  return {
    // Mainnet blocks are up to ~4 MB (8 MB of hex): a few at a time.
    batchBlocks: 4,
    headHeight: () => node.headHeight(),
    async hashAt(height) {
      return (await node.hashAt(height))?.toLowerCase();
    },
    async read(from, to) {
      const headers = await chain();
      const hashes = headers
        ? await headers.hashes(from, to)
        : await Promise.all(Array.from({ length: to - from + 1 }, (_, i) => node.hashAt(from + i)));
      if (!hashes || hashes.some((h) => h === undefined)) return undefined;
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
        checkHeader(b, powLimit);
        checkTransactions(b);
        checkWitnessCommitment(b, merkleRoot);
        return b;
      });
      o.sawBlocks?.(blocks);
      const outputs: Output[] = [];
      // What transactions' bytes a read may carry in all: a report stays far below the RPC port's
      // body limit (BODY_LIMIT_BYTES, 1 MiB by default) whatever blocks it holds; past it, outputs
      // go without (their PSBTs then carry the witness UTXO only).
      let rawBudget = maxRawBytesPerRead;
      for (const b of blocks) {
        for (const tx of b.tx) {
          // A transaction's bytes go with its first watched output only: a batch paying a hundred
          // intents would otherwise send (and the core keep) them a hundred times.
          let carried = false;
          for (const out of tx.outputs) {
            const toAddress = watched.addressOf(out.script);
            if (toAddress === undefined) continue;
            const rawTransaction = carried || tx.stripped.length > rawBudget ? undefined : tx.stripped;
            if (rawTransaction) rawBudget -= rawTransaction.length;
            carried = true;
            outputs.push({
              asset: asset.asset,
              toAddress,
              txHash: tx.txid,
              outputIndex: out.n,
              amount: formatUnits(out.value, asset.decimals),
              blockHeight: b.height,
              blockHash: b.hash,
              blockTime: b.time,
              rawTransaction,
            });
          }
        }
      }
      return {
        blocks: blocks.map((b) => ({
          height: b.height,
          hash: b.hash,
          parentHash: b.previousblockhash,
          time: b.time,
          ...(headers ? { chainwork: headers.workAt(b.height).toString(16) } : {}),
        })),
        outputs,
      };
    },
  };
}

/**
 * The header chain a source reads through, decided at its first read: mainnet's from its
 * checkpoint (or the one given: tests), regtest's from its block 0; none for other test networks
 * (their block 0 is not regtest's), whose difficulty rules are not checked here.
 */
function headerChainOf(node: BitcoinNode, rules: "mainnet" | "test", given: Checkpoint | undefined): () => Promise<HeaderChain | undefined> {
  let decided: Promise<HeaderChain | undefined> | undefined;
  return () => {
    decided ??= (async () => {
      if (rules === "mainnet") return new HeaderChain(node, given ?? mainnetCheckpoint, "mainnet");
      const genesis = given ?? regtestGenesis;
      return (await node.hashAt(genesis.height))?.toLowerCase() === genesis.hash ? new HeaderChain(node, genesis, "test") : undefined;
    })().catch((err: unknown) => {
      decided = undefined;
      throw err;
    });
    return decided;
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
