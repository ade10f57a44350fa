import { formatUnits, type Hex } from "viem";
import type { AssetInfo } from "../vocabulary/assets.ts";
import { BlockRefused } from "./block-refused.ts";
import { addressTopic, bloomBit, bloomBits, bloomHas, parseBloom, type BloomBits } from "./evm-bloom.ts";
import { coveredTransfers, transferBits, type BloomWatched } from "./evm-coverage.ts";
import type { EvmBlock, EvmNode, TokenTransfer } from "./evm-node.ts";
import type { ChainSource, Output } from "./follow.ts";
import { allSettled, readInParts } from "./read-parts.ts";
import type { WatchedAddresses } from "./watched.ts";

/**
 * Addresses compared lowercase: a node writes them checksummed or not. For the logs bloom check
 * (evm-coverage.ts), each one's bits as a Transfer's `to` are worked out once (a keccak each, tens
 * of microseconds) and kept while it is watched, through the full re-read every 10 minutes
 * (clear, then the same addresses again); a block's bloom is then tested against them all from
 * one array.
 */
export class EvmWatched implements WatchedAddresses, BloomWatched {
  readonly #set = new Set<string>();
  #bits = new Map<string, BloomBits>();
  /** The bits of the addresses before the last clear, for those added again. */
  #before = new Map<string, BloomBits>();
  /** The addresses in order and their bits, three a slot; undefined once the set changed. */
  #table: { addresses: string[]; bits: Uint16Array } | undefined;
  add(address: string): void {
    const a = address.toLowerCase();
    if (this.#set.has(a)) return;
    this.#set.add(a);
    this.#table = undefined;
  }
  clear(): void {
    this.#set.clear();
    if (this.#bits.size > 0) this.#before = this.#bits;
    this.#bits = new Map();
    this.#table = undefined;
  }
  has(address: string): boolean {
    return this.#set.has(address.toLowerCase());
  }
  get size(): number {
    return this.#set.size;
  }
  inBloom(bloom: Uint8Array): string[] {
    const { addresses, bits } = (this.#table ??= this.#tabled());
    const out: string[] = [];
    for (let i = 0; i < addresses.length; i++) {
      if (bloomBit(bloom, bits[3 * i] as number) && bloomBit(bloom, bits[3 * i + 1] as number) && bloomBit(bloom, bits[3 * i + 2] as number)) out.push(addresses[i] as string);
    }
    return out;
  }
  /** A watched address's bits as a Transfer's `to`, from those kept (hashed once while it is watched). */
  bitsOf(address: string): BloomBits {
    const a = address.toLowerCase();
    let b = this.#bits.get(a) ?? this.#before.get(a);
    if (!b) b = bloomBits(addressTopic(a));
    if (this.#set.has(a)) this.#bits.set(a, b);
    return b;
  }
  #tabled(): { addresses: string[]; bits: Uint16Array } {
    const addresses = [...this.#set];
    const bits = new Uint16Array(3 * addresses.length);
    addresses.forEach((a, i) => bits.set(this.bitsOf(a), 3 * i));
    this.#before = new Map();
    return { addresses, bits };
  }
}

/**
 * An EVM chain as the follower reads it: native value in top-level transactions that succeeded
 * (only when the network has a native asset we accept) and ERC-20 Transfer logs of the asset
 * table's contracts, fetched by contract and topic and matched against the watched set in memory,
 * each block's checked against its logs bloom (evm-coverage.ts) unless `bloom` is false (a chain
 * whose headers carry no real bloom, as TRON's).
 */
export function evmSource(node: EvmNode, assets: readonly { info: AssetInfo; contract: string | undefined }[], watched: EvmWatched, o: { bloom?: boolean; headerHashes?: boolean } = {}): ChainSource {
  const tokens = new Map(assets.filter((a) => a.contract).map((a) => [(a.contract as string).toLowerCase(), a.info]));
  const native = assets.find((a) => !a.contract)?.info;
  /**
   * A block is believed only if its header's fields hash to the hash it names (unless
   * `headerHashes` is false: TRON's hashes are not of its JSON's fields). Its parent hash is one
   * of those fields, so the parent links the follower checks are then the chain's, not the
   * node's word: a witness agreeing on a batch's top ties every block below it.
   */
  const checked = (b: EvmBlock): EvmBlock => {
    if (o.headerHashes === false) return b;
    const named = { height: b.height, hash: b.hash.toLowerCase() };
    if ("malformed" in b.fieldsHash) throw new BlockRefused("header", named, `its header's fields do not make a header: ${b.fieldsHash.malformed}`);
    if (b.fieldsHash.hash.toLowerCase() !== named.hash) throw new BlockRefused("header", named, `its header's fields hash to ${b.fieldsHash.hash}, not the hash the node named`);
    return b;
  };
  // Hashed once: a batch checks thousands of transfers against the same few contracts.
  const contractBits = new Map([...tokens.keys()].map((c) => [c, bloomBits(c as Hex)]));
  const inBloom = (t: TokenTransfer, b: EvmBlock, bloom: Uint8Array | undefined) => {
    const bits = [contractBits.get(t.contract.toLowerCase()) as BloomBits, transferBits, watched.bitsOf(t.to)];
    if (!bloom || !bits.every((item) => bloomHas(bloom, item))) {
      throw new BlockRefused("logs_bloom", { height: b.height, hash: b.hash.toLowerCase() }, `its header's logs bloom does not hold the Transfer ${t.txHash} (log ${t.logIndex}) the node tells of in it`);
    }
  };
  return {
    batchBlocks: 20,
    headHeight: () => node.headHeight(),
    async hashAt(height) {
      const b = await node.block(height, false);
      return b && checked(b).hash.toLowerCase();
    },
    async read(from, to) {
      // Blocks with their transactions, and logs over a range, can be more than one answer may
      // carry (a mainnet or Polygon block is 1 MB and more): each is read in parts that fit. The
      // logs are asked for beside the blocks, and the receipts of the transfers they tell of as
      // soon as they are in: the blocks with their transactions are the longest answers, and
      // the read used to wait for each of the three in turn.
      const contracts = [...tokens.keys()];
      const blocksRead = readInParts(from, to, async (f, t) => {
        const part = await allSettled(Array.from({ length: t - f + 1 }, (_, i) => node.block(f + i, native !== undefined)));
        return part.some((b) => b === undefined) ? undefined : (part as EvmBlock[]);
      }, tooLarge);
      const logsRead = contracts.length === 0 ? Promise.resolve([]) : readInParts(from, to, (f, t) => node.tokenTransfers(contracts, f, t), tooLarge);
      const asked = new Map<string, ReturnType<EvmNode["receipt"]>>();
      const receiptOf = (txHash: string) => {
        const hash = txHash.toLowerCase();
        let receipt = asked.get(hash);
        if (!receipt) {
          receipt = node.receipt(hash);
          // Awaited where it is used; one never used (the read failed first) fails unheard.
          receipt.catch(() => undefined);
          asked.set(hash, receipt);
        }
        return receipt;
      };
      logsRead.then(
        (ranged) => ranged?.forEach((t) => tokens.has(t.contract.toLowerCase()) && watched.has(t.to) && receiptOf(t.txHash)),
        () => undefined,
      );
      const [blocks, ranged] = await Promise.all([blocksRead, logsRead]);
      if (!blocks || !ranged) return undefined;
      blocks.forEach(checked);
      const byHash = new Map(blocks.map((b) => [b.hash.toLowerCase(), b]));
      // Logs must come from the blocks fetched: otherwise a reorg happened between the calls.
      if (ranged.some((t) => !byHash.has(t.blockHash.toLowerCase()))) return undefined;
      const transfers = o.bloom === false ? ranged : await coveredTransfers(node, contracts, blocks, ranged, watched);

      // A token output is known by its place among its transaction's logs, the same in whichever
      // block the transaction is mined (the block-wide logIndex is not): read from its receipt.
      // A native transfer counts only if its transaction succeeded: a call that reverted (to a
      // contract, or an EIP-7702 delegated account, at a deposit address) still carries its value.
      const matched = transfers.filter((t) => tokens.has(t.contract.toLowerCase()) && watched.has(t.to));
      // A log is in its block's bloom, which is in its (checked) header: a Transfer the bloom does
      // not hold is one the node made up beside a real block.
      if (o.headerHashes !== false) {
        // Each block's bloom parsed once for all its transfers.
        const blooms = new Map(blocks.map((b) => [b, parseBloom(b.logsBloom)]));
        for (const t of matched) {
          const b = byHash.get(t.blockHash.toLowerCase()) as EvmBlock;
          inBloom(t, b, blooms.get(b));
        }
      }
      const valued = native ? blocks.flatMap((b) => b.valueTransfers.filter((t) => watched.has(t.to)).map((t) => ({ ...t, block: b }))) : [];
      const txs = [...new Set([...matched, ...valued].map((t) => t.txHash.toLowerCase()))];
      const receipts = await allSettled(txs.map(receiptOf));
      const receiptByHash = new Map(txs.map((h, i) => [h, receipts[i]]));

      const outputs: Output[] = [];
      for (const t of valued) {
        const receipt = receiptByHash.get(t.txHash.toLowerCase());
        // No receipt, or one from another block: the chain changed under the read.
        if (!receipt || receipt.blockHash !== t.block.hash.toLowerCase()) return undefined;
        if (!receipt.success) continue;
        const { asset, decimals } = native as AssetInfo;
        outputs.push({ asset, toAddress: t.to, txHash: t.txHash, outputIndex: 0, amount: formatUnits(t.value, decimals), blockHeight: t.block.height, blockHash: t.block.hash.toLowerCase(), blockTime: t.block.timestamp });
      }
      for (const t of matched) {
        const info = tokens.get(t.contract.toLowerCase()) as AssetInfo;
        const receipt = receiptByHash.get(t.txHash.toLowerCase());
        const position = receipt?.logIndexes.indexOf(t.logIndex) ?? -1;
        if (!receipt || receipt.blockHash !== t.blockHash.toLowerCase() || position < 0) return undefined;
        const b = byHash.get(t.blockHash.toLowerCase()) as EvmBlock;
        outputs.push({ asset: info.asset, toAddress: t.to, txHash: t.txHash, outputIndex: 1 + position, amount: formatUnits(t.value, info.decimals), blockHeight: b.height, blockHash: b.hash.toLowerCase(), blockTime: b.timestamp });
      }
      return {
        blocks: blocks.map((b) => ({ height: b.height, hash: b.hash.toLowerCase(), parentHash: b.parentHash.toLowerCase(), time: b.timestamp })),
        outputs,
      };
    },
  };
}

/**
 * Whether a read failed for its size, so that smaller parts may succeed: an answer over the
 * client's cap (viem's ResponseBodyTooLargeError, WATCHER_MAX_RESPONSE_BYTES), one the node or provider refused as over
 * its limits (JSON-RPC -32005, viem's LimitExceededRpcError: e.g. "query returned more than 10000
 * results"), or one that took too long to come (a part is asked for only after the node answered
 * for its head, so a timeout here is the size of the answer more than an outage). Providers that
 * answer an eth_getLogs range too wide with another code are known by their words; a rate limit
 * is not a size.
 */
export function tooLarge(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) {
    // viem's message goes on with the URL and the request; its short message and details are the node's words.
    const { shortMessage, details, status } = e as { shortMessage?: string; details?: string; status?: number };
    const words = shortMessage === undefined ? e.message : `${shortMessage} ${details ?? ""}`;
    if (status === 429 || /\brate\b|too many requests|quota|credits|capacity/i.test(words)) return false;
    if (e.name === "ResponseBodyTooLargeError" || e.name === "LimitExceededRpcError" || e.name === "TimeoutError") return true;
    if (/too large|too big|too wide|size limit|response size|more than \d+ (results|logs)|block range|exceeds? (the )?max(imum)? (block )?range|is limited to/i.test(words)) return true;
  }
  return false;
}
