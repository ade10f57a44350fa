import { formatUnits } from "viem";
import { bitcoinScript } from "../addresses/formats.ts";
import type { AssetInfo } from "../vocabulary/assets.ts";
import { satoshis, type BitcoinBlock, type BitcoinNode } from "./bitcoin-node.ts";
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
 * (`getblockhash`) and then whole (`getblock <hash> 2`), every output of every transaction
 * (the coinbase's too) matched by its script. An output is a payment whether or not it is spent
 * later: the service receives, it does not keep a wallet.
 */
export function bitcoinSource(node: BitcoinNode, asset: AssetInfo, watched: BitcoinWatched): ChainSource {
  return {
    // Mainnet blocks are up to ~4 MB of hex, more as JSON: a few at a time.
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
      const blocks = await readInParts(from, to, async (f, t) => {
        const part = await allSettled((hashes as string[]).slice(f - from, t - from + 1).map((h) => node.block(h)));
        return part.some((b) => b === undefined) ? undefined : (part as BitcoinBlock[]);
      }, () => true);
      if (!blocks) return undefined;
      const outputs: Output[] = [];
      for (const b of blocks) {
        const blockHash = b.hash.toLowerCase();
        for (const tx of b.tx) {
          for (const out of tx.vout) {
            const toAddress = watched.addressOf(out.scriptPubKey.hex);
            if (toAddress === undefined) continue;
            outputs.push({
              asset: asset.asset,
              toAddress,
              txHash: tx.txid.toLowerCase(),
              outputIndex: out.n,
              amount: formatUnits(satoshis(out.value), asset.decimals),
              blockHeight: b.height,
              blockHash,
              blockTime: b.time,
            });
          }
        }
      }
      return {
        blocks: blocks.map((b) => ({ height: b.height, hash: b.hash.toLowerCase(), parentHash: (b.previousblockhash ?? "").toLowerCase(), time: b.time })),
        outputs,
      };
    },
  };
}
