import type { ChainEndpoint } from "../platform/config.ts";
import type { Logger } from "../platform/logger.ts";
import { assets, chainAssetsIn, findAsset, type AssetInfo } from "../vocabulary/assets.ts";
import { checkHeader } from "./bitcoin-checks.ts";
import { bitcoinNode } from "./bitcoin-node.ts";
import { BitcoinMempool, bitcoinSource, BitcoinWatched } from "./bitcoin-source.ts";
import { evmNode, redactNodeUrl, type ToldTransaction } from "./evm-node.ts";
import { evmSource, EvmWatched } from "./evm-source.ts";
import { toldDiffers } from "./evm-told.ts";
import type { ChainSource, Output } from "./follow.ts";
import { bitcoinFacts, evmFacts, refusal, type NodeFacts } from "./node-check.ts";
import { tronNode, tronSource, TronWatched } from "./tron-source.ts";
import type { WatchedAddresses } from "./watched.ts";

/** What a watcher reads of its node, whatever the kind of chain: the one place that knows the kinds. */
export interface ChainReader {
  source: ChainSource;
  watched: WatchedAddresses;
  /** Which chain the node serves, as it says itself. */
  facts(): Promise<NodeFacts>;
  /** The time (seconds) of the best chain's block at `height`. */
  timeAt(height: number): Promise<number>;
  /**
   * The node's mempool (bitcoin only). EVM chains have none here: a block every 12 s (2 s on
   * polygon) leaves little to gain, and a token Transfer log exists only once mined.
   */
  mempool?: BitcoinMempool;
  /**
   * This node's word on transfers another node reported (EVM chains; undefined elsewhere): a
   * witness confirms each by telling the same transaction (evm-told.ts). For each output in
   * order, undefined where it agrees, else what differs.
   */
  confirm?(outputs: readonly Output[]): Promise<(string | undefined)[]>;
  close(): Promise<void>;
}

/** The node of an endpoint, the source that reads it for the follower, and the watched set it matches against. */
export function chainReader(e: ChainEndpoint, timeoutMs?: number): ChainReader {
  if (e.network === "bitcoin") {
    const node = bitcoinNode(e.url, timeoutMs, e.maxResponseBytes);
    const watched = new BitcoinWatched();
    const btc = findAsset("bitcoin", "BTC") as AssetInfo;
    const mempool = new BitcoinMempool(node, btc, watched);
    return {
      // The blocks the follower reads show the mempool reader the spends that conflict with payments.
      // A Live node proved it serves mainnet: its blocks' targets follow mainnet's rules too.
      source: bitcoinSource(node, btc, watched, { rules: e.environment === "live" ? "mainnet" : "test", sawBlocks: (blocks) => mempool.sawBlocks(blocks) }),
      watched,
      mempool,
      facts: () => bitcoinFacts(node),
      async timeAt(height) {
        const hash = await node.hashAt(height);
        const header = hash === undefined ? undefined : await node.header(hash);
        if (!header) throw new Error(`block ${height} is not on the node's best chain`);
        // Its time is believed only from fields that hash to the block's hash.
        checkHeader({ ...header, hash: hash as string, height });
        return header.time;
      },
      // Plain HTTP requests: nothing to close.
      close: async () => {},
    };
  }
  // TRON through its Ethereum-compatible JSON-RPC: the EVM node and source, with TRON's differences (tron-source.ts).
  const tron = e.network === "tron";
  const node = tron ? tronNode(e.url, timeoutMs, e.maxResponseBytes) : evmNode(e.url, timeoutMs, e.maxResponseBytes);
  // A token with no contract in this environment is not read at all (AssetInfo.contract): it is not the native coin.
  const chainAssets = chainAssetsIn(e.network, e.environment);
  const network = e.network;
  let watched: EvmWatched;
  let source: ChainSource;
  if (tron) {
    const tronWatched = new TronWatched();
    [watched, source] = [tronWatched, tronSource(node, chainAssets, tronWatched)];
  } else {
    watched = new EvmWatched();
    source = evmSource(node, chainAssets, watched);
  }
  const assetOf = (asset: string) => chainAssets.find((a) => a.info.asset === asset);
  return {
    source,
    watched,
    facts: () => evmFacts(node, network),
    // TRON's JSON-RPC writes addresses and receipts otherwise: its transfers are vouched for by the batch's top block only.
    ...(tron
      ? {}
      : {
          async confirm(outputs: readonly Output[]) {
            // Each transaction told once, a hundred at a time: requests made together go in one round trip.
            const txs = [...new Set(outputs.map((o) => o.txHash.toLowerCase()))];
            const told = new Map<string, ToldTransaction | undefined>();
            for (let i = 0; i < txs.length; i += 100) {
              const part = txs.slice(i, i + 100);
              (await Promise.all(part.map((h) => node.told(h)))).forEach((t, j) => told.set(part[j] as string, t));
            }
            return outputs.map((o) => {
              const a = assetOf(o.asset);
              if (!a) return `${o.asset} is not an asset of ${network}`;
              return toldDiffers(told.get(o.txHash.toLowerCase()), o, { contract: a.contract?.toLowerCase(), decimals: a.info.decimals });
            });
          },
        }),
    async timeAt(height) {
      const block = await node.block(height, false);
      if (!block) throw new Error(`block ${height} is not on the node's best chain`);
      return block.timestamp;
    },
    close: () => node.close(),
  };
}

/**
 * Start-time check of each endpoint: one that answers for the wrong chain is bad configuration
 * (a Live watcher must follow mainnet; a Test one never does). One that does not answer, or is
 * still syncing, is not: the watcher proves the node again before it reads anything, and says so once.
 */
export async function checkEndpoints(endpoints: readonly ChainEndpoint[], logger: Logger): Promise<string | undefined> {
  for (const e of endpoints) {
    const name = `${e.network.toUpperCase()}_${e.environment.toUpperCase()}_RPC_URL`;
    const reader = chainReader(e, 5000);
    let facts: NodeFacts;
    try {
      facts = await reader.facts();
    } catch (err) {
      logger.warn({ chain: `${e.network}/${e.environment}`, node: redactNodeUrl(e.url), reason: (err as Error).message.split("\n")[0] }, `${name} does not answer; the watcher will keep trying`);
      continue;
    } finally {
      await reader.close().catch(() => undefined);
    }
    // Still syncing, or too little work yet (a node syncing mainnet), is waited for, not a wrong configuration.
    const wrong = refusal(e, { ...facts, syncing: false, chainwork: undefined }, undefined);
    if (wrong) return `${name}: ${wrong}`;
  }
  return undefined;
}
