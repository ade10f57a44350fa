/**
 * Whether the token Transfer logs read over a range cover every block of it. A node behind a
 * provider can answer `eth_getLogs` from a replica that lags the one that served the blocks: `[]`
 * for a block it does not have yet, which would record the block without its payment, for good.
 * Each block's header says what its logs may hold (its logs bloom); a block whose bloom may hold a
 * watched transfer the range answer lacks is read again by its hash.
 *
 * The rule, per block the range answer holds no log of whose bloom may hold (a token contract AND
 * the Transfer topic AND a watched address as `to`):
 * - its Transfer logs are read again by block hash (EIP-234), which a node without the block
 *   refuses rather than answering empty; what that answer holds replaces the range's for the block;
 * - an answer by hash with logs of the block is the node's whole word on it (a node indexes a
 *   block's logs together): a watched address still missing was a bloom false positive;
 * - an empty answer by hash proves nothing by itself (a false positive for the contract and topic
 *   too, or a node that has not the logs): the block's logs are read whole, by hash, and must
 *   account for every bit of its header's bloom. Then the node has the block's logs and none pays
 *   a watched address: a false positive, accepted, so it never holds up the chain. Otherwise the
 *   read fails (BlockReadError) and is retried with backoff, the block never recorded empty.
 * Nothing is asked in the normal case: a bloom that holds no watched address costs no call.
 */
import { bloomBits, bloomCovers, bloomHas, bloomOf, parseBloom } from "./evm-bloom.ts";
import type { EvmBlock, EvmNode, TokenTransfer } from "./evm-node.ts";
import { transferTopic } from "./evm-told.ts";
import { allSettled, BlockReadError } from "./read-parts.ts";

/** The Transfer topic's bloom bits, hashed once. */
export const transferBits = bloomBits(transferTopic);

/** The watched addresses (lowercase) a block's bloom may hold as a Transfer's `to`. */
export interface BloomWatched {
  inBloom(bloom: Uint8Array): string[];
}

/**
 * The Transfer logs of `contracts` in `blocks`, `transfers` (the range's answer, every log of
 * one of the blocks) made whole where a block's bloom says they are not; throws BlockReadError
 * for a block whose logs the node does not serve.
 */
export async function coveredTransfers(
  node: EvmNode,
  contracts: readonly string[],
  blocks: readonly EvmBlock[],
  transfers: readonly TokenTransfer[],
  watched: BloomWatched,
): Promise<TokenTransfer[]> {
  if (contracts.length === 0) return [...transfers];
  const contractBits = contracts.map((c) => bloomBits(c as `0x${string}`));
  // A node indexes a block's logs together: a block with any log in the answer was answered whole
  // (a lagging replica answers nothing of a block it lacks). Only blocks the answer is silent on
  // are checked, so a chain whose token moves every block (mainnet's USDC) costs no call.
  const answered = new Set(transfers.map((t) => t.blockHash.toLowerCase()));
  const suspects: { block: EvmBlock; bloom: Uint8Array }[] = [];
  for (const block of blocks) {
    const bloom = parseBloom(block.logsBloom);
    if (!bloom) throw new BlockReadError(block.height, new Error(`the node gave no logs bloom of 256 bytes: ${String(block.logsBloom).slice(0, 20)}`));
    if (answered.has(block.hash.toLowerCase())) continue;
    if (!bloomHas(bloom, transferBits) || !contractBits.some((b) => bloomHas(bloom, b))) continue;
    if (watched.inBloom(bloom).length > 0) suspects.push({ block, bloom });
  }
  if (suspects.length === 0) return [...transfers];
  const again = await allSettled(suspects.map((s) => readAgain(node, contracts, s.block, s.bloom)));
  const replaced = new Set(suspects.map((s) => s.block.hash.toLowerCase()));
  return [...transfers.filter((t) => !replaced.has(t.blockHash.toLowerCase())), ...again.flat()];
}

/** One block's Transfer logs by its hash, under the rule above. */
async function readAgain(node: EvmNode, contracts: readonly string[], block: EvmBlock, bloom: Uint8Array): Promise<TokenTransfer[]> {
  const hash = block.hash.toLowerCase();
  const fail = (why: string) => new BlockReadError(block.height, new Error(why));
  const logs = await node.tokenTransfersAt(contracts, hash);
  if (logs.some((l) => l.blockHash.toLowerCase() !== hash)) throw fail("the node answered logs of another block for its hash");
  if (logs.length > 0) return logs;
  const all = await node.logsAt(hash);
  if (all.some((l) => l.blockHash.toLowerCase() !== hash)) throw fail("the node answered logs of another block for its hash");
  // Only a subset is asked of the logs read (a chain may log more than its header's bloom holds, as Polygon's state syncs).
  if (!bloomCovers(bloomOf(all), bloom)) throw fail("its logs did not come back: its logs bloom may hold a watched token transfer that the node answered no log for");
  return [];
}
