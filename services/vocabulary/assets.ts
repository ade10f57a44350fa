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
   * token rather than the native coin.
   */
  contract?: { live: string; test: string };
}

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
];

/** EIP-155 chain ids for EIP-681 payment URIs; test is Sepolia and Polygon Amoy. */
export const evmChainIds: Readonly<Record<"ethereum" | "polygon", { live: number; test: number }>> = {
  ethereum: { live: 1, test: 11155111 },
  polygon: { live: 137, test: 80002 },
};

/** The networks the built-in chain watcher follows (bitcoin through Bitcoin Core's RPC, the others through Ethereum JSON-RPC, tron's Ethereum-compatible one); payments on the rest come from an ObservationService client of the operator's own. */
export const followedNetworks = ["bitcoin", "ethereum", "polygon", "tron"] as const;

/**
 * How many best blocks a fork may take away and still be followed, by default (<NETWORK>_MAX_REORG_DEPTH):
 * a deeper fork stops the chain's counting until an operator looks (docs/payments.md says why each).
 * Bitcoin: coinbase outputs mature after 100 blocks, a depth no honest reorg reached (the deepest
 * since 2010, the March 2013 fork, was 24). Ethereum: finality is two epochs (64 slots); 128 is
 * four. Tron: a block is irreversible after 19 of 27 super representatives confirm it. Polygon
 * PoS: a 157-block reorg happened in February 2023, before milestones bounded it.
 */
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
 * them (0x, lowercase).
 */
export const mainnetGenesis: Readonly<Record<(typeof followedNetworks)[number], string>> = {
  bitcoin: "000000000019d6689c085ae165831e934ff763ae46a2a6c172b3f1b60a8ce26f",
  ethereum: "0xd4e56740f876aef8c010b86a40d5f56745a118d0906a34e69aec8c0db1cb8fa3",
  polygon: "0xa9c28ce2141b56c474f1dc504bee9b01eb1bd7d1a507580d5519d4437a97de1b",
  // TRON mainnet's BlockId of block 0: eth_chainId is its last 4 bytes (0x2b6653dc). Published in
  // the ChainAgnostic namespaces' tron/caip2.md beside the chain ids the developer hub's
  // eth_chainId lists, and by block explorers' getblockbynum 0.
  tron: "0x00000000000000001ebf88508a03865c71d452e25f4d51194196a1d22b6653dc",
};

export const defaultMaxReorgDepth: Readonly<Record<(typeof followedNetworks)[number], number>> = { bitcoin: 100, ethereum: 128, polygon: 256, tron: 128 };

export const networks: readonly string[] = [...new Set(assets.map((a) => a.network))];

export function findAsset(network: string, asset: string): AssetInfo | undefined {
  return assets.find((a) => a.network === network && a.asset === asset);
}

export function assetsOn(network: string): string[] {
  return assets.filter((a) => a.network === network).map((a) => a.asset);
}
