import { defaultMaxResponseBytes } from "../platform/config.ts";
import { createPublicClient, http, toHex, type PublicClient } from "viem";
import { blockOf, receiptOf, transfersOf } from "./evm-json.ts";
import { transferTopic } from "./evm-told.ts";

/** A block as the watcher needs it: where it sits, and (when asked for) its top-level transactions that carry value. */
export interface EvmBlock {
  height: number;
  hash: string;
  parentHash: string;
  /** Seconds since the epoch. */
  timestamp: number;
  /** The header's logs bloom as the node wrote it (hex): what the block's logs may hold. */
  logsBloom: string | undefined;
  /** Top-level transactions with a recipient and a value above zero. */
  valueTransfers: { txHash: string; to: string; value: bigint }[];
  /** The hash the header's fields hash to (evm-header.ts), lowercase, or why they hash to none: what the source checks `hash` against. */
  fieldsHash: { hash: string } | { malformed: string };
}

/** An ERC-20 Transfer log of a watched token contract. */
export interface TokenTransfer {
  blockHash: string;
  height: number;
  txHash: string;
  logIndex: number;
  contract: string;
  to: string;
  value: bigint;
}

/** What the watcher asks of an Ethereum JSON-RPC node. */
export interface EvmNode {
  chainId(): Promise<number>;
  /** The hash of block 0: with the chain id, which chain the node serves (a reset dev chain keeps its id). */
  genesisHash(): Promise<string>;
  /** Whether the node says it is still syncing (`eth_syncing` answers an object rather than false). */
  syncing(): Promise<boolean>;
  headHeight(): Promise<number>;
  /** The canonical block at `height`, or undefined past the head; with its value transfers only when `withTransactions`. */
  block(height: number, withTransactions: boolean): Promise<EvmBlock | undefined>;
  /** Transfer logs of `contracts` in blocks from..to (inclusive), fetched by contract and topic, not by recipient. */
  tokenTransfers(contracts: readonly string[], from: number, to: number): Promise<TokenTransfer[]>;
  /** The same in the one block of that hash (EIP-234): a node that does not have the block fails rather than answering an empty range. */
  tokenTransfersAt(contracts: readonly string[], blockHash: string): Promise<TokenTransfer[]>;
  /** Every log of the block of that hash, as much of each as its bloom holds. */
  logsAt(blockHash: string): Promise<{ blockHash: string; address: string; topics: string[] }[]>;
  /**
   * A transaction's receipt: whether it succeeded (status 1), the block it is in, and the
   * block-wide logIndex of each of its logs, in order; undefined when the node has no receipt (not
   * mined, or reorged away).
   */
  receipt(txHash: string): Promise<{ blockHash: string; success: boolean; logIndexes: number[] } | undefined>;
  /**
   * What the node tells of a mined transaction, for a second node's word on a transfer
   * (evm-told.ts): its block, whether it succeeded, its own recipient and value, and its receipt's
   * logs in order; undefined when the node has no such mined transaction.
   */
  told(txHash: string): Promise<ToldTransaction | undefined>;
  close(): Promise<void>;
}

/** A mined transaction as a node tells it (eth_getTransactionByHash and eth_getTransactionReceipt). */
export interface ToldTransaction {
  blockHash: string;
  success: boolean;
  /** Lowercase; null for a contract creation. */
  to: string | null;
  value: bigint;
  logs: { address: string; topics: string[]; data: string }[];
}

/** A viem public client over http(s); requests made together are batched into one round trip. */
export function evmNode(url: string, timeoutMs = 10_000, maxResponseBytes = defaultMaxResponseBytes): EvmNode {
  // viem's own retries would hide an outage from the watcher's backoff and its metrics. Its cap on
  // an answer (ResponseBodyTooLargeError: the read fails, a range is read again in parts) is
  // WATCHER_MAX_RESPONSE_BYTES, like every node answer's.
  const transport = http(url, { retryCount: 0, timeout: timeoutMs, batch: { batchSize: 100, wait: 0 }, maxResponseBodySize: maxResponseBytes });
  const client: PublicClient = createPublicClient({ transport });
  // A block with its transactions is about 1 KB a transaction (1 MB and more on mainnet or Polygon):
  // each is a request of its own, on kept-alive connections, so that blocks read together are not
  // one response over the cap on an answer however big they are.
  const fullBlocks: PublicClient = createPublicClient({ transport: http(url, { retryCount: 0, timeout: timeoutMs, maxResponseBodySize: maxResponseBytes }) });
  // What the watcher reads in bulk is asked through viem's transport (batches, timeouts, the cap,
  // its errors) and read by evm-json.ts, not formatted by viem's actions field by field.
  const request = rawRequest(client);
  const fullRequest = rawRequest(fullBlocks);
  return {
    async chainId() {
      return client.getChainId();
    },

    async genesisHash() {
      return (await client.getBlock({ blockNumber: 0n })).hash.toLowerCase();
    },

    async syncing() {
      // viem's public schema has no eth_syncing (every node serves it): a request of our own.
      return (await request("eth_syncing", [])) !== false;
    },

    async headHeight() {
      return Number(await client.getBlockNumber({ cacheTime: 0 }));
    },

    async block(height, withTransactions) {
      return blockOf(await (withTransactions ? fullRequest : request)("eth_getBlockByNumber", [toHex(height), withTransactions]), withTransactions);
    },

    async tokenTransfers(contracts, from, to) {
      if (contracts.length === 0) return [];
      return transfersOf(await request("eth_getLogs", [{ address: [...contracts], topics: [transferTopic], fromBlock: toHex(from), toBlock: toHex(to) }]));
    },

    async tokenTransfersAt(contracts, blockHash) {
      if (contracts.length === 0) return [];
      return transfersOf(await request("eth_getLogs", [{ address: [...contracts], topics: [transferTopic], blockHash }]));
    },

    async logsAt(blockHash) {
      const logs = await client.getLogs({ blockHash: blockHash as `0x${string}` });
      return logs.filter((l) => !l.removed && l.blockHash !== null).map((l) => ({ blockHash: l.blockHash as string, address: l.address, topics: [...l.topics] }));
    },

    async receipt(txHash) {
      return receiptOf(await request("eth_getTransactionReceipt", [txHash]));
    },

    async told(txHash) {
      const hash = txHash as `0x${string}`;
      // Asked together: one round trip (the transport batches them).
      const [tx, receipt] = await Promise.all([
        client.getTransaction({ hash }).catch((err: Error) => (err.name === "TransactionNotFoundError" ? undefined : Promise.reject(err))),
        client.getTransactionReceipt({ hash }).catch((err: Error) => (err.name === "TransactionReceiptNotFoundError" ? undefined : Promise.reject(err))),
      ]);
      // Not mined, or told in two blocks at once (a node between two branches): nothing it can vouch for.
      if (!tx || !receipt || tx.blockHash === null || tx.blockHash.toLowerCase() !== receipt.blockHash.toLowerCase()) return undefined;
      return {
        blockHash: receipt.blockHash.toLowerCase(),
        success: receipt.status === "success",
        to: tx.to?.toLowerCase() ?? null,
        value: tx.value,
        logs: receipt.logs.map((l) => ({ address: l.address.toLowerCase(), topics: l.topics.map((t) => t.toLowerCase()), data: l.data.toLowerCase() })),
      };
    },

    // Plain HTTP requests on kept-alive connections: nothing to close.
    async close() {},
  };
}

/** A JSON-RPC call through a viem client's transport, answered as the node wrote it. */
function rawRequest(c: PublicClient): (method: string, params: unknown[]) => Promise<unknown> {
  const request = c.request as (args: { method: string; params: unknown[] }) => Promise<unknown>;
  return (method, params) => request({ method, params });
}

/** A node URL as logs may show it: scheme, host and port only (providers put their API keys in the path or userinfo). */
export function redactNodeUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}`;
  } catch {
    return "(unparseable URL)";
  }
}
