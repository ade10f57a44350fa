import type { ChainEndpoint } from "../platform/config.ts";
import { evmChainIds, mainnetGenesis, type EvmNetwork } from "../vocabulary/assets.ts";
import type { BitcoinNode } from "./bitcoin-node.ts";
import type { EvmNode } from "./evm-node.ts";
import { tronChainIds } from "./tron-source.ts";

/**
 * The least total work a Live bitcoin node's best tip may have: Bitcoin Core 30.0's
 * `nMinimumChainWork` for mainnet (src/kernel/chainparams.cpp, CMainParams, set in September
 * 2025 with the assumed-valid block 912683). A node with less (a private chain copying mainnet's
 * block 0, a node fed a low-work fork, one that has not synced) is refused: any chain with the
 * real one's history has more. Raised with each Bitcoin Core release's value, never above it.
 */
export const bitcoinMinimumChainwork = 0xdee8e2a309ad8a9820433c68n;

/** The chain id a Live node must name, per network followed through Ethereum JSON-RPC. */
const mainnetChainIds: Readonly<Record<EvmNetwork | "tron", number>> = {
  ethereum: evmChainIds.ethereum.live,
  polygon: evmChainIds.polygon.live,
  base: evmChainIds.base.live,
  arbitrum: evmChainIds.arbitrum.live,
  tron: tronChainIds.mainnet,
};

/**
 * The chain ids a Test node may name, where not every chain that is not mainnet will do: TRON's
 * public testnets (Nile, Shasta; a local dev chain takes Nile's). Elsewhere any chain but mainnet.
 */
const testChainIds: Readonly<Partial<Record<EvmNetwork | "tron", readonly (readonly [number, string])[]>>> = {
  tron: [
    [tronChainIds.nile, "Nile"],
    [tronChainIds.shasta, "Shasta"],
  ],
};

/** What a node says of the chain it serves. */
export interface NodeFacts {
  /** How the node names its chain: `chain id 11155111`, `bitcoin's regtest chain`. */
  chain: string;
  /** Whether that name is the network's mainnet (chain id, or bitcoind's `main`). */
  mainnet: boolean;
  /** Block 0's hash, lowercase. */
  genesisHash: string;
  /** Still syncing (`eth_syncing`, bitcoind's initial block download): its head is not the chain's. */
  syncing: boolean;
  /**
   * Bitcoin: the best tip's total work (getblockchaininfo's chainwork, hex; "" when the node did
   * not say). Undefined where nothing is checked of it (EVM chains, the start's configuration check).
   */
  chainwork?: string;
  /** On networks whose Test chains are a known few (tron): whether the name is one of them, else why not. Unset elsewhere. */
  testnet?: { ok: true } | { ok: false; expected: string };
}

/** Asks an EVM node (or TRON's Ethereum-compatible JSON-RPC) which chain it serves, in one round trip (viem batches the three). */
export async function evmFacts(node: EvmNode, network: EvmNetwork | "tron"): Promise<NodeFacts> {
  const [chainId, genesisHash, syncing] = await Promise.all([node.chainId(), node.genesisHash(), node.syncing()]);
  const facts: NodeFacts = { chain: `chain id ${chainId}`, mainnet: chainId === mainnetChainIds[network], genesisHash: genesisHash.toLowerCase(), syncing };
  const known = testChainIds[network];
  if (known) {
    facts.testnet = known.some(([id]) => id === chainId)
      ? { ok: true }
      : { ok: false, expected: known.map(([id, name]) => `${name}'s chain id ${id}`).join(" or ") };
  }
  return facts;
}

/** Asks a Bitcoin Core node which chain it serves (`getblockchaininfo`, `getblockhash 0`). */
export async function bitcoinFacts(node: BitcoinNode): Promise<NodeFacts> {
  const [info, genesis] = await Promise.all([node.info(), node.hashAt(0)]);
  if (genesis === undefined) throw new Error("getblockhash 0: the node has no block 0");
  return { chain: `bitcoin's ${info.chain} chain`, mainnet: info.chain === "main", genesisHash: genesis.toLowerCase(), syncing: info.initialBlockDownload, chainwork: info.chainwork };
}

/**
 * Why a watcher must not follow a node, or undefined when it may. A Live watcher follows only
 * mainnet, by name and by block 0; a Test one never does. `pinned` is the chain this process
 * proved the node served first: a node that names another chain since (a load balancer or
 * provider URL moved) is refused until it serves that chain again. A node still syncing is
 * refused too: its head is not the chain's, and what it has not seen is not absent. A Live
 * bitcoin node whose best tip has less work than bitcoinMinimumChainwork is refused as well.
 */
export function refusal(e: Pick<ChainEndpoint, "network" | "environment">, facts: NodeFacts, pinned: string | undefined): string | undefined {
  // Either sign of mainnet keeps a Test watcher off it; a Live one needs both.
  const genesis = mainnetGenesis[e.network];
  const isMainnet = facts.mainnet || facts.genesisHash === genesis;
  if (e.environment === "live" && !facts.mainnet) return `the node follows ${facts.chain}, not ${e.network} mainnet: Live payments are only watched on mainnet`;
  if (e.environment === "live" && facts.genesisHash !== genesis) {
    return `the node names ${facts.chain} but its block 0 is ${facts.genesisHash}, not ${e.network} mainnet's`;
  }
  if (e.environment === "test" && isMainnet) return `the node follows ${e.network} mainnet (${facts.chain}): Test intents are paid on a testnet or a local dev chain`;
  if (e.environment === "test" && facts.testnet?.ok === false) {
    return `the node follows ${facts.chain}, not a ${e.network} testnet (${facts.testnet.expected}; a local dev chain takes one of them): Test payments are only watched there`;
  }
  if (pinned !== undefined && facts.chain !== pinned) return `the node changed chains while followed: it served ${pinned} and now names ${facts.chain}`;
  if (facts.syncing) return "the node is still syncing: it is followed once it has caught up";
  if (e.network === "bitcoin" && e.environment === "live" && facts.chainwork !== undefined) {
    const work = /^[0-9a-f]{1,64}$/i.test(facts.chainwork) ? BigInt(`0x${facts.chainwork}`) : undefined;
    if (work === undefined || work < bitcoinMinimumChainwork) {
      return `the node's best chain has ${work === undefined ? "no chainwork said" : `chainwork ${facts.chainwork}`}, less than mainnet's minimum ${bitcoinMinimumChainwork.toString(16)} (Bitcoin Core 30.0's nMinimumChainWork): not followed`;
    }
  }
  return undefined;
}

/**
 * The lowest height in 0..head whose block time is at or after `time` (seconds), head + 1 when
 * none is: block times grow along a chain but for small steps back (bitcoin allows a block to
 * be older than its parent), so callers pass a time with some slack taken off.
 */
export async function firstBlockAtOrAfter(timeAt: (height: number) => Promise<number>, head: number, time: number): Promise<number> {
  let low = 0;
  let high = head + 1;
  while (low < high) {
    const mid = Math.floor((low + high) / 2);
    if ((await timeAt(mid)) >= time) high = mid;
    else low = mid + 1;
  }
  return low;
}
