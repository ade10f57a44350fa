import { formatUnits } from "viem";
import type { AssetInfo } from "../vocabulary/assets.ts";
import type { EvmBlock, EvmNode } from "./evm-node.ts";
import type { ChainSource, Output } from "./follow.ts";
import type { WatchedAddresses } from "./watched.ts";

/** Addresses compared lowercase: a node writes them checksummed or not. */
export class EvmWatched implements WatchedAddresses {
  readonly #set = new Set<string>();
  add(address: string): void {
    this.#set.add(address.toLowerCase());
  }
  clear(): void {
    this.#set.clear();
  }
  has(address: string): boolean {
    return this.#set.has(address.toLowerCase());
  }
  get size(): number {
    return this.#set.size;
  }
}

/**
 * An EVM chain as the follower reads it: native value in top-level transactions (only when the
 * network has a native asset we accept) and ERC-20 Transfer logs of the asset table's contracts,
 * fetched by contract and topic and matched against the watched set in memory.
 */
export function evmSource(node: EvmNode, assets: readonly { info: AssetInfo; contract: string | undefined }[], watched: EvmWatched): ChainSource {
  const tokens = new Map(assets.filter((a) => a.contract).map((a) => [(a.contract as string).toLowerCase(), a.info]));
  const native = assets.find((a) => !a.contract)?.info;
  return {
    batchBlocks: 20,
    headHeight: () => node.headHeight(),
    async hashAt(height) {
      return (await node.block(height, false))?.hash.toLowerCase();
    },
    async read(from, to) {
      const heights = Array.from({ length: to - from + 1 }, (_, i) => from + i);
      const blocks = await Promise.all(heights.map((h) => node.block(h, native !== undefined)));
      const transfers = await node.tokenTransfers([...tokens.keys()], from, to);
      if (blocks.some((b) => b === undefined)) return undefined;
      const byHash = new Map((blocks as EvmBlock[]).map((b) => [b.hash.toLowerCase(), b]));
      // Logs must come from the blocks fetched: otherwise a reorg happened between the calls.
      if (transfers.some((t) => !byHash.has(t.blockHash.toLowerCase()))) return undefined;

      const outputs: Output[] = [];
      for (const b of blocks as EvmBlock[]) {
        if (!native) break;
        for (const t of b.valueTransfers) {
          if (!watched.has(t.to)) continue;
          outputs.push({ asset: native.asset, toAddress: t.to, txHash: t.txHash, outputIndex: 0, amount: formatUnits(t.value, native.decimals), blockHeight: b.height, blockHash: b.hash.toLowerCase(), blockTime: b.timestamp });
        }
      }
      for (const t of transfers) {
        const info = tokens.get(t.contract.toLowerCase());
        if (!info || !watched.has(t.to)) continue;
        const b = byHash.get(t.blockHash.toLowerCase()) as EvmBlock;
        outputs.push({ asset: info.asset, toAddress: t.to, txHash: t.txHash, outputIndex: 1 + t.logIndex, amount: formatUnits(t.value, info.decimals), blockHeight: b.height, blockHash: b.hash.toLowerCase(), blockTime: b.timestamp });
      }
      return {
        blocks: (blocks as EvmBlock[]).map((b) => ({ height: b.height, hash: b.hash.toLowerCase(), parentHash: b.parentHash.toLowerCase(), time: b.timestamp })),
        outputs,
      };
    },
  };
}
