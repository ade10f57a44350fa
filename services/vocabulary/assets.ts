/**
 * The networks and assets we accept, with the decimals amounts are validated
 * against and the confirmations the chain watcher waits for.
 */
export interface AssetInfo {
  network: string;
  asset: string;
  decimals: number;
  confirmations: number;
  /**
   * The token's contract (ERC-20/TRC-20) or SPL mint, per environment; absent
   * for the chain's native coin. Payment URIs name it so a wallet sends the
   * token rather than the native coin. A test of null: the issuer has no token
   * on the network's testnet, and the asset is offered on Live only (offeredIn).
   */
  contract?: { live: string; test: string | null };
}

/*
 * Where the contracts come from. USDC: Circle's developer documentation, "USDC Contract
 * Addresses" (developers.circle.com/stablecoins/usdc-contract-addresses), its Mainnet and Testnet
 * tables. USDT: Tether's "Supported Protocols" page (tether.to/en/supported-protocols) for
 * ethereum and tron, and Tether's Wallet Development Kit documentation (tetherto/wdk-docs,
 * skills/wdk/references/deployments.md, "USD₮0 Omnichain Deployments") for polygon, whose USDT is
 * USDT0 since 2025 at the PoS token's old address. Tether's test USD₮ on Sepolia is the Aave
 * faucet's (the same kit's resources/concepts.mdx, "Testnet Funds & Faucets"); Tether names none
 * on Amoy, so polygon's USDT is Live only.
 */

export const assets: readonly AssetInfo[] = [
  { network: "bitcoin", asset: "BTC", decimals: 8, confirmations: 2 },
  { network: "ethereum", asset: "ETH", decimals: 18, confirmations: 12 },
  {
    network: "ethereum",
    asset: "USDC",
    decimals: 6,
    confirmations: 12,
    // Test: Circle's USDC on Sepolia.
    contract: { live: "0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48", test: "0x1c7D4B196Cb0C7B01d743Fbc6116a902379C7238" },
  },
  {
    network: "ethereum",
    asset: "USDT",
    decimals: 6,
    confirmations: 12,
    // Tether has no Sepolia deployment; test is the Aave V3 Sepolia faucet "USDT" (6 decimals), the one most tooling uses.
    contract: { live: "0xdAC17F958D2ee523a2206206994597C13D831ec7", test: "0xaA8E23Fb1079EA71e0a56F48a2aA51851D8433D0" },
  },
  {
    network: "tron",
    asset: "USDT",
    decimals: 6,
    confirmations: 20,
    // Test: USDT on the Nile testnet.
    contract: { live: "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t", test: "TXYZopYRdj2D9XRtbG411XZZ3kM5VkAeBf" },
  },
  { network: "solana", asset: "SOL", decimals: 9, confirmations: 32 },
  {
    network: "solana",
    asset: "USDC",
    decimals: 6,
    confirmations: 32,
    // SPL mints; test is Circle's devnet USDC.
    contract: { live: "EPjFWdd5AufqSSqeM2qaxKEbt1M7cnjvn6k3K1qN9i8", test: "4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU" },
  },
  {
    network: "polygon",
    asset: "USDC",
    decimals: 6,
    confirmations: 64,
    // Native (Circle-issued) USDC, not bridged USDC.e; test is Circle's USDC on Amoy.
    contract: { live: "0x3c499c542cEF5E3811e1192ce70d8cC03d5c3359", test: "0x41E94Eb019C0762f9Bfcf9Fb1E58725BfB0e7582" },
  },
  {
    network: "polygon",
    asset: "USDT",
    decimals: 6,
    confirmations: 64,
    // USDT0 (Tether's omnichain USDT) at the address PoS-bridged USDT always had; no Amoy token: Live only.
    contract: { live: "0xc2132D05D31c914a87C6611C10748AEb04B58e8F", test: null },
  },
  // Base and Arbitrum are rollups whose gas coin is ether: ETH there is ETH (one rate), paid as a
  // native transfer like ethereum's, at the network's own confirmations (defaultMaxReorgDepth says why).
  { network: "base", asset: "ETH", decimals: 18, confirmations: 60 },
  { network: "arbitrum", asset: "ETH", decimals: 18, confirmations: 480 },
  {
    network: "base",
    asset: "USDC",
    decimals: 6,
    // About 2 minutes of 2 s blocks: by then the sequencer's batch holding the block is on L1 (`safe`).
    confirmations: 60,
    // Native (Circle-issued) USDC, not the bridged USDbC; test is Circle's USDC on Base Sepolia.
    contract: { live: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913", test: "0x036CbD53842c5426634e7929541eC2318f3dCF7e" },
  },
  {
    network: "arbitrum",
    asset: "USDC",
    decimals: 6,
    // 2 minutes of 250 ms blocks, as on base: the sequencer posts its batches to L1 every few
    // minutes, so a younger block is mostly the sequencer's word alone.
    confirmations: 480,
    // Native (Circle-issued) USDC, not bridged USDC.e (0xFF97…); test is Circle's USDC on Arbitrum Sepolia.
    contract: { live: "0xaf88d065e77c8cC2239327C5EDb3A432268e5831", test: "0x75faf114eafb1BDbe2F0316DF893fd58CE46AA4d" },
  },
];

/** The EVM networks: one address format, key path (m/44'/60'/0') and payment URI scheme ("ethereum:") for all, the chain id telling them apart. */
export type EvmNetwork = "ethereum" | "polygon" | "base" | "arbitrum";

/** EIP-155 chain ids for EIP-681 payment URIs; test is Sepolia, Polygon Amoy, Base Sepolia and Arbitrum Sepolia. */
export const evmChainIds: Readonly<Record<EvmNetwork, { live: number; test: number }>> = {
  ethereum: { live: 1, test: 11155111 },
  polygon: { live: 137, test: 80002 },
  base: { live: 8453, test: 84532 },
  arbitrum: { live: 42161, test: 421614 },
};

/** Whether `network` is one of the EVM networks (evmChainIds names each). */
export function isEvmNetwork(network: string): network is EvmNetwork {
  return Object.hasOwn(evmChainIds, network);
}

/** The networks the built-in chain watcher follows (bitcoin through Bitcoin Core's RPC, the others through Ethereum JSON-RPC, tron's Ethereum-compatible one); payments on the rest come from an ObservationService client of the operator's own. */
export const followedNetworks = ["bitcoin", "ethereum", "polygon", "base", "arbitrum", "tron"] as const;

export type FollowedNetwork = (typeof followedNetworks)[number];

/**
 * How many best blocks a watcher keeps to find where a fork left the chain, and ClaimChain hands
 * it: twice the deepest fork followed, and some, so a deeper one is found with its depth (the core
 * keeps more: 2 048).
 */
export function reorgWindow(maxReorgDepth: number): number {
  return 2 * maxReorgDepth + 16;
}

/**
 * How many blocks a fork takes away, in words: "40 blocks", or "at least 32 blocks" when the
 * branches part below every block known of the chain (the depth counted is a lower bound).
 */
export function blocksTaken(depth: number, atLeast: boolean): string {
  return `${atLeast ? "at least " : ""}${depth} ${depth === 1 ? "block" : "blocks"}`;
}

/**
 * Block 0 of each followed network's mainnet: a Live node must serve it, whatever chain id or name
 * it claims, and a Live chain's reports must name it (the core never learns Live's block 0 from a
 * report). Bitcoin's hash is bare, as Bitcoin Core writes it; the others as their JSON-RPC writes
 * them (0x, lowercase). Every network the built-in watcher follows, and so every network
 * ChainService takes, has one (the type says so); were one missing, its Live reports would be
 * refused (chains/linkage.ts admit). Solana's facts come through ObservationService only.
 */
export const mainnetGenesis = {
  bitcoin: "000000000019d6689c085ae165831e934ff763ae46a2a6c172b3f1b60a8ce26f",
  ethereum: "0xd4e56740f876aef8c010b86a40d5f56745a118d0906a34e69aec8c0db1cb8fa3",
  polygon: "0xa9c28ce2141b56c474f1dc504bee9b01eb1bd7d1a507580d5519d4437a97de1b",
  // Base mainnet's L2 block 0: the rollup config's genesis.l2.hash in the superchain registry
  // (ethereum-optimism/superchain-registry, superchain/configs/mainnet/base.toml), which op-node
  // and op-geth build Base from.
  base: "0xf712aa9241cc24369b143cf6dce85f0902a9731e70d66818a3a5845b296c73dd",
  // Arbitrum One's block 0 (the classic chain's, below the Nitro genesis at 22 207 817: a node
  // must hold the classic history to serve it). Offchain Labs publishes no block hash (nitro's
  // cmd/chaininfo/arbitrum_chain_info.json names none; nor do arbitrum-docs or arbitrum-sdk), so
  // it is taken from foundry's `cast chain` table (foundry-rs/foundry, crates/cast/src/lib.rs
  // Cast::chain: "arbitrum-mainnet"), the table whose ethereum and polygon entries are the hashes
  // pinned above, and it is the hash indexers test for Arbitrum One (subsquid's evm processor).
  // A wrong pin fails closed: every Live arbitrum node would be refused, naming its block 0, and
  // none could speak for a chain it is not.
  arbitrum: "0x7ee576b35482195fc49205cec9af72ce14f003b9ae69f6ba0faef4514be8b442",
  // TRON mainnet's BlockId of block 0: eth_chainId is its last 4 bytes (0x2b6653dc). Published in
  // the ChainAgnostic namespaces' tron/caip2.md beside the chain ids the developer hub's
  // eth_chainId lists, and by block explorers' getblockbynum 0.
  tron: "0x00000000000000001ebf88508a03865c71d452e25f4d51194196a1d22b6653dc",
} satisfies Record<FollowedNetwork, string>;

/** The pinned block 0 of `network`'s mainnet (mainnetGenesis); undefined for a network no built-in watcher follows, whose Live chain reports are refused. */
export function mainnetBlock0(network: string): string | undefined {
  return (mainnetGenesis as Readonly<Partial<Record<string, string>>>)[network];
}

/**
 * How many best blocks a fork may take away and still be followed, by default (<NETWORK>_MAX_REORG_DEPTH):
 * a deeper fork stops the chain's counting until an operator looks (docs/payments.md says why each).
 * Bitcoin: coinbase outputs mature after 100 blocks, a depth no honest reorg reached (the deepest
 * since 2010, the March 2013 fork, was 24). Ethereum: finality is two epochs (64 slots); 128 is
 * four. Tron: a block is irreversible after 19 of 27 super representatives confirm it. Polygon
 * PoS: a 157-block reorg happened in February 2023, before milestones bounded it. Base (an OP
 * Stack L2, a block every 2 s): a block's batch is on L1 (`safe`) within about 2 minutes (60
 * blocks) and final with L1 in about 20 (600 blocks); deeper than that a reorg would undo L1
 * finality. Arbitrum One (a block every ~250 ms): the sequencer posts batches to L1 every few
 * minutes and a block is final with L1 some 15-20 minutes later, 4 000 blocks and more. The
 * default is 1 000 (about 4 minutes, past the usual batch posting), the most <NETWORK>_MAX_REORG_DEPTH
 * allows (platform/config.ts maxReorgDepthLimit: the core keeps 2 048 blocks and a watcher walks
 * back twice the depth); a deeper fork stops the chain for a person to look.
 */
export const defaultMaxReorgDepth: Readonly<Record<FollowedNetwork, number>> = { bitcoin: 100, ethereum: 128, polygon: 256, base: 600, arbitrum: 1000, tron: 128 };

export const networks: readonly string[] = [...new Set(assets.map((a) => a.network))];

export function findAsset(network: string, asset: string): AssetInfo | undefined {
  return assets.find((a) => a.network === network && a.asset === asset);
}

export function assetsOn(network: string): string[] {
  return assets.filter((a) => a.network === network).map((a) => a.asset);
}

/** Whether `info` can be paid in `environment`: a native coin always, a token where it has a contract there (AssetInfo.contract). */
export function offeredIn(info: AssetInfo, environment: "live" | "test"): boolean {
  return info.contract === undefined || info.contract[environment] !== null;
}

/** The assets of `network` that can be paid in `environment`, with their contract there (undefined: the native coin), as a watcher reads them. */
export function chainAssetsIn(network: string, environment: "live" | "test"): { info: AssetInfo; contract: string | undefined }[] {
  return assets.filter((a) => a.network === network && offeredIn(a, environment)).map((info) => ({ info, contract: info.contract?.[environment] ?? undefined }));
}

/** Why `info` cannot be paid in `environment`, for an error message; undefined when it can. */
export function notOfferedReason(info: AssetInfo, environment: "live" | "test"): string | undefined {
  if (offeredIn(info, environment)) return undefined;
  return `${info.asset} on ${info.network} is offered on Live only: its issuer has no token on ${info.network}'s testnet, so a Test intent could not be paid in it`;
}
