/**
 * TRON, followed through java-tron's Ethereum-compatible JSON-RPC (`/jsonrpc`; FullNode port 8545,
 * Solidity port 8555 by default) with the EVM node and source: TRC-20 `Transfer` logs have ERC-20's
 * topic and layout, and blocks link up by parent hash as Ethereum's do. Every way TRON's JSON-RPC
 * differs from Ethereum's that matters to the watcher is here, each named after TRON's own
 * documentation of the method (java-tron's docs/api/json-rpc/…; the developer hub's "JSON-RPC API").
 * The rest of the watcher (follower, reorgs, leases, position, metrics) is the EVM chains' as is.
 */
import { createPublicClient, http, LimitExceededRpcError } from "viem";
import { tronFromHex20, tronToHex20 } from "../addresses/formats.ts";
import type { AssetInfo } from "../vocabulary/assets.ts";
import { evmNode, type EvmNode } from "./evm-node.ts";
import { evmSource, EvmWatched } from "./evm-source.ts";
import type { ChainSource } from "./follow.ts";

/** eth_chainId: "the last 4 bytes of the BlockId of block 0" (eth_chainId.md), so each network's is a constant. */
export const tronChainIds = { mainnet: 728126428, nile: 3448148188, shasta: 2494104990 } as const;

/**
 * A node whose own clock puts its head more than this many blocks (3 s each) behind is still
 * syncing: a minute. See `syncingFrom` for why TRON needs a threshold where Ethereum has a flag.
 */
export const tronSyncSlackBlocks = 20;

/**
 * Whether an `eth_syncing` answer says the node is still syncing. Documented difference
 * (eth_syncing.md): java-tron answers `false` only when it has no peers; any node with peers, caught
 * up or not, answers a SyncingResult object, whose `highestBlock` is not a peer's height but
 * estimated from the node's clock: `currentBlock + max(0, (now − head's time) / 3000 ms)`. Ethereum
 * answers `false` once caught up, so the EVM node's "anything but false" would refuse every TRON
 * node that has peers. Here: syncing when that estimate is more than tronSyncSlackBlocks ahead.
 * A node with no peers answers `false` as Ethereum's caught-up node does (the watcher's lag
 * metrics show a head that stops moving).
 */
export function syncingFrom(answer: unknown): boolean {
  if (answer === false || answer === null || answer === undefined) return false;
  if (typeof answer !== "object") return true;
  const { currentBlock, highestBlock } = answer as { currentBlock?: unknown; highestBlock?: unknown };
  if (typeof currentBlock !== "string" || typeof highestBlock !== "string") return true;
  try {
    return BigInt(highestBlock) - BigInt(currentBlock) > BigInt(tronSyncSlackBlocks);
  } catch {
    return true;
  }
}

/**
 * Documented difference (json-rpc index.md, "Error responses"): java-tron refuses an answer over
 * its `maxResponseSize` (default 25 MiB) with code -32003 "Response exceeds the limit of N bytes",
 * a code Ethereum's JSON-RPC (EIP-1474) gives "transaction rejected", and viem reads it so
 * (TransactionRejectedRpcError). For the watcher it is a read too large: smaller parts may fit.
 */
function responseTooLarge(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) {
    const { code, details, shortMessage } = e as { code?: number; details?: string; shortMessage?: string };
    if (code === -32003 && /exceeds the limit/i.test(`${details ?? ""} ${shortMessage ?? ""} ${e.message}`)) return true;
  }
  return false;
}

async function sized<T>(read: () => Promise<T>): Promise<T> {
  try {
    return await read();
  } catch (err) {
    throw responseTooLarge(err) ? new LimitExceededRpcError(err as Error) : err;
  }
}

/**
 * A TRON node's JSON-RPC as an EvmNode. Documented differences it takes care of:
 * - Transport (index.md): HTTP POST only, at the path `/jsonrpc`; no WebSocket (config refuses ws(s) for every node).
 * - `eth_syncing`: see syncingFrom.
 * - Maximum response size: see responseTooLarge.
 * And what needs no change, checked against the docs:
 * - Block tags (index.md, eth_getBlockByNumber.md, eth_getLogs.md): `pending` and `safe` are refused
 *   (-32602 "TAG pending not supported"); the EVM node never sends a tag: `eth_blockNumber` for the
 *   head, blocks and log ranges by hex height, block 0 as `0x0`.
 * - `eth_getBlockByNumber` fields (eth_getBlockByHash.md): `hash` is the BlockId (its first 8 bytes are
 *   the height), 32 bytes with `0x` as Ethereum's; `timestamp` in seconds (the block's own is in
 *   milliseconds, divided by 1000); `stateRoot` may be just `0x`, `logsBloom`, `receiptsRoot`,
 *   `mixHash` and `nonce` are constant zeros, `difficulty` 0: the watcher reads only number, hash,
 *   parentHash and timestamp, and never filters blocks by bloom (logs come from eth_getLogs), so
 *   the EVM source's check of each block's logs against its bloom is off for tron.
 *   `null` past the head, as Ethereum's. Blocks are read without transactions: TRX transfers are
 *   not watched (the asset table has no TRX).
 * - `eth_getLogs` (eth_getLogs.md): addresses are 20-byte hex (see tronSource); at most
 *   `maxBlockRange` 5000 blocks (-32602 "exceed max block range"), 1000 addresses and 10 000 results
 *   (-32005) a query: the source asks for at most 20 blocks of one contract, and splits a range the
 *   node refuses as too many results (tooLarge). A pruned block on a lite fullnode is -32000.
 * - Batches: at most `maxBatchSize` 100 requests, the EVM node's batch size.
 * - On the Solidity port `eth_blockNumber` and `latest` are the latest solidified block: a watcher
 *   pointed there sees only blocks that can no longer change.
 */
export function tronNode(url: string, timeoutMs = 10_000, maxResponseBytes?: number): EvmNode {
  const node = evmNode(url, timeoutMs, maxResponseBytes);
  const raw = createPublicClient({ transport: http(url, { retryCount: 0, timeout: timeoutMs }) });
  const request = raw.request as (args: { method: string; params?: unknown[] }) => Promise<unknown>;
  return {
    ...node,
    async syncing() {
      return syncingFrom(await request({ method: "eth_syncing", params: [] }));
    },
    block: (height, withTransactions) => sized(() => node.block(height, withTransactions)),
    tokenTransfers: (contracts, from, to) => sized(() => node.tokenTransfers(contracts, from, to)),
    // eth_getTransactionReceipt.md: the receipt's logs carry logIndex, blockHash and the rest as
    // eth_getLogs writes them, so a token output's place in its transaction is read as on Ethereum.
    receipt: (txHash) => node.receipt(txHash),
  };
}

/**
 * TRON's deposit addresses kept for matching. Documented difference (index.md, "Address
 * encoding"; eth_getLogs.md): JSON-RPC writes addresses, log filters and the indexed `to` of a
 * Transfer log as 20-byte hex, without TRON's `41` prefix and never base58check; the API and the
 * core know the `T…` form. The set holds each address's 20 bytes.
 */
export class TronWatched extends EvmWatched {
  override add(address: string): void {
    const hex = tronToHex20(address);
    // The core hands out checked addresses; anything else can match no log.
    if (hex !== undefined) super.add(hex);
  }
}

/**
 * The TRC-20 transfers of the asset table's TRON contracts to watched addresses, read by the EVM
 * source: contracts asked for in their 20-byte form, and each output's address written back as
 * the `T…` address the core knows. No native coin: TRX is not in the asset table, so blocks are
 * read without their transactions.
 */
export function tronSource(node: EvmNode, assets: readonly { info: AssetInfo; contract: string | undefined }[], watched: TronWatched): ChainSource {
  const tokens = assets.flatMap((a) => {
    const hex = a.contract === undefined ? undefined : tronToHex20(a.contract);
    if (a.contract !== undefined && hex === undefined) throw new Error(`the asset table's tron contract of ${a.info.asset} is not a tron address: ${a.contract}`);
    return hex === undefined ? [] : [{ info: a.info, contract: hex }];
  });
  // Its headers' logsBloom is constant zeros: no bloom to check a range's logs against.
  const inner = evmSource(node, tokens, watched, { bloom: false, headerHashes: false });
  return {
    ...inner,
    async read(from, to) {
      const read = await inner.read(from, to);
      if (!read) return undefined;
      return { ...read, outputs: read.outputs.map((o) => ({ ...o, toAddress: tronFromHex20(o.toAddress) as string })) };
    },
  };
}
