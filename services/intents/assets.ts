/**
 * The networks and assets we accept, with the decimals amounts are validated
 * against and the confirmations the chain watcher waits for.
 */
export interface AssetInfo {
  network: string;
  asset: string;
  decimals: number;
  confirmations: number;
}

export const assets: readonly AssetInfo[] = [
  { network: "bitcoin", asset: "BTC", decimals: 8, confirmations: 2 },
  { network: "ethereum", asset: "ETH", decimals: 18, confirmations: 12 },
  { network: "ethereum", asset: "USDC", decimals: 6, confirmations: 12 },
  { network: "ethereum", asset: "USDT", decimals: 6, confirmations: 12 },
  { network: "tron", asset: "USDT", decimals: 6, confirmations: 20 },
  { network: "solana", asset: "SOL", decimals: 9, confirmations: 32 },
  { network: "solana", asset: "USDC", decimals: 6, confirmations: 32 },
  { network: "polygon", asset: "USDC", decimals: 6, confirmations: 64 },
];

export const networks: readonly string[] = [...new Set(assets.map((a) => a.network))];

export function findAsset(network: string, asset: string): AssetInfo | undefined {
  return assets.find((a) => a.network === network && a.asset === asset);
}

export function assetsOn(network: string): string[] {
  return assets.filter((a) => a.network === network).map((a) => a.asset);
}
