import { parseUnits } from "viem";
import type { Output } from "./follow.ts";
import type { ToldTransaction } from "./evm-node.ts";

/** keccak256("Transfer(address,address,uint256)"): an ERC-20 (and TRC-20) Transfer log's first topic. */
export const transferTopic = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef";

/** The address an indexed address word holds (12 zero bytes, then the address), lowercase; undefined for any other word. */
export function transferRecipient(word: string): string | undefined {
  const w = word.toLowerCase();
  return /^0x0{24}[0-9a-f]{40}$/.test(w) ? `0x${w.slice(26)}` : undefined;
}

/** The asset an output is of, as the chain's contracts say it: its token contract (lowercase; none: the native coin) and decimals. */
export interface OutputAsset {
  contract: string | undefined;
  decimals: number;
}

/**
 * Whether a second node's account of a transaction (evm-node.ts `told`) is the transfer the read
 * node reported: the same block, a transaction that succeeded, and for a token transfer the log at
 * the output's place in the receipt (outputIndex - 1) from the same contract, with Transfer's
 * topic, to the same recipient, of the same amount; for the native coin, the transaction's own
 * recipient and value. Undefined when it agrees; otherwise what differs, for the log and `ops
 * chains`. A node that invented the transfer (or the block it is in) has nothing a second node
 * can agree with.
 */
export function toldDiffers(told: ToldTransaction | undefined, o: Output, asset: OutputAsset): string | undefined {
  if (!told) return "it has no such mined transaction";
  if (told.blockHash !== o.blockHash.toLowerCase()) return `it has the transaction in block ${told.blockHash}`;
  if (!told.success) return "the transaction failed there";
  const amount = parseUnits(o.amount, asset.decimals);
  const to = o.toAddress.toLowerCase();
  if (asset.contract === undefined) {
    if (o.outputIndex !== 0) return `output ${o.outputIndex} of a native transfer`;
    if (told.to !== to) return `the transaction pays ${told.to ?? "no one (a contract creation)"}`;
    if (told.value !== amount) return `the transaction carries ${told.value} wei, not ${amount}`;
    return undefined;
  }
  const log = told.logs[o.outputIndex - 1];
  if (!log) return `its receipt has no log ${o.outputIndex - 1}`;
  if (log.address !== asset.contract.toLowerCase()) return `log ${o.outputIndex - 1} is from ${log.address}`;
  if (log.topics[0] !== transferTopic || log.topics.length !== 3) return `log ${o.outputIndex - 1} is not a Transfer`;
  if (transferRecipient(log.topics[2] ?? "") !== to) return `log ${o.outputIndex - 1} pays ${log.topics[2]}`;
  if (!/^0x[0-9a-f]{64}$/.test(log.data) || BigInt(log.data) !== amount) return `log ${o.outputIndex - 1} moves ${log.data}, not ${amount}`;
  return undefined;
}
