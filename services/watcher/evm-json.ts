import { evmHeaderHash } from "./evm-header.ts";
import type { EvmBlock, TokenTransfer } from "./evm-node.ts";
import { transferRecipient, transferTopic } from "./evm-told.ts";

/**
 * The node's JSON answers the watcher reads in bulk (blocks with their transactions, Transfer
 * logs, receipts), read as geth documents them, field by field, for only what the watcher keeps.
 * viem's actions format every field of every transaction, log and receipt (bigints, numbers, and
 * an EIP-55 checksum, a keccak, for each address an event's arguments hold): in a catch-up that
 * was a third of the watcher's CPU for fields it drops. A field the watcher keeps that is not what
 * geth writes fails the read (retried with backoff), as viem's formatting failed it.
 */
export class MalformedAnswer extends Error {
  override name = "MalformedAnswer";
}

const hexQuantity = /^0x[0-9a-fA-F]{1,64}$/;
const hash32 = /^0x[0-9a-fA-F]{64}$/;
const address20 = /^0x[0-9a-fA-F]{40}$/;

function quantity(v: unknown, what: string): bigint {
  if (typeof v !== "string" || !hexQuantity.test(v)) throw new MalformedAnswer(`the node's ${what} is not a hex quantity`);
  return BigInt(v);
}

function hash(v: unknown, what: string): string {
  if (typeof v !== "string" || !hash32.test(v)) throw new MalformedAnswer(`the node's ${what} is not a 32-byte hash`);
  return v;
}

function record(v: unknown, what: string): Record<string, unknown> {
  if (typeof v !== "object" || v === null || Array.isArray(v)) throw new MalformedAnswer(`the node's ${what} is not an object`);
  return v as Record<string, unknown>;
}

/** An `eth_getBlockByNumber` answer (null: no block at that height); its value transfers only when it holds full transactions. */
export function blockOf(json: unknown, withTransactions: boolean): EvmBlock | undefined {
  if (json === null) return undefined;
  const b = record(json, "block");
  const valueTransfers: EvmBlock["valueTransfers"] = [];
  if (withTransactions) {
    if (!Array.isArray(b.transactions)) throw new MalformedAnswer("the node's block has no transactions list");
    for (const item of b.transactions) {
      // Hashes alone, where the transactions were asked for, would hide the block's native payments.
      if (typeof item === "string") throw new MalformedAnswer("the node's block lists transaction hashes where its transactions were asked for");
      const tx = record(item, "transaction");
      // A contract creation has no recipient (null); a value of zero pays no one.
      if (tx.to === null || tx.to === undefined) continue;
      const value = quantity(tx.value, "transaction value");
      if (value === 0n) continue;
      if (typeof tx.to !== "string" || !address20.test(tx.to)) throw new MalformedAnswer("the node's transaction recipient is not an address");
      valueTransfers.push({ txHash: hash(tx.hash, "transaction hash"), to: tx.to, value });
    }
  }
  let fieldsHash: EvmBlock["fieldsHash"];
  try {
    fieldsHash = { hash: evmHeaderHash(b) };
  } catch (err) {
    fieldsHash = { malformed: (err as Error).message };
  }
  return {
    height: Number(quantity(b.number, "block number")),
    hash: hash(b.hash, "block hash"),
    parentHash: hash(b.parentHash, "parent hash"),
    timestamp: Number(quantity(b.timestamp, "block timestamp")),
    logsBloom: typeof b.logsBloom === "string" ? b.logsBloom : undefined,
    valueTransfers,
    fieldsHash,
  };
}

/**
 * The ERC-20 Transfer logs of an `eth_getLogs` answer. A log of the same signature that is not an
 * ERC-20 Transfer (ERC-721 indexes its third argument: four topics) or whose recipient is not an
 * address's 32-byte word (12 zero bytes, then the address), as the ABI writes an indexed address,
 * moves nothing; a log the node marks removed is of a block no longer on its chain.
 */
export function transfersOf(json: unknown): TokenTransfer[] {
  if (!Array.isArray(json)) throw new MalformedAnswer("the node's logs are not a list");
  const out: TokenTransfer[] = [];
  for (const item of json) {
    const log = record(item, "log");
    if (log.removed === true || log.blockHash === null || log.transactionHash === null) continue;
    const topics = log.topics;
    if (!Array.isArray(topics) || topics.length !== 3 || String(topics[0]).toLowerCase() !== transferTopic) continue;
    const to = transferRecipient(String(topics[2]));
    if (to === undefined || typeof log.data !== "string" || !hash32.test(log.data)) continue;
    if (typeof log.address !== "string" || !address20.test(log.address)) throw new MalformedAnswer("the node's log address is not an address");
    out.push({
      blockHash: hash(log.blockHash, "log block hash"),
      height: Number(quantity(log.blockNumber, "log block number")),
      txHash: hash(log.transactionHash, "log transaction hash"),
      logIndex: Number(quantity(log.logIndex, "log index")),
      contract: log.address,
      to,
      value: BigInt(log.data),
    });
  }
  return out;
}

/** An `eth_getTransactionReceipt` answer (null: none, not mined or reorged away): its block, whether it succeeded (status 1), and its logs' block-wide indexes in order. */
export function receiptOf(json: unknown): { blockHash: string; success: boolean; logIndexes: number[] } | undefined {
  if (json === null) return undefined;
  const r = record(json, "receipt");
  if (!Array.isArray(r.logs)) throw new MalformedAnswer("the node's receipt has no logs list");
  return {
    blockHash: hash(r.blockHash, "receipt block hash").toLowerCase(),
    // Before Byzantium a receipt had a state root, not a status: nothing says it succeeded.
    success: r.status !== undefined && quantity(r.status, "receipt status") === 1n,
    logIndexes: r.logs.map((l) => Number(quantity(record(l, "receipt log").logIndex, "receipt log index"))),
  };
}
