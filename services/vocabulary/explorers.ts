/**
 * Where a transaction of each network can be looked at, Live and Test ({tx}: its hash): the
 * dashboard links each transaction there. An operator replaces any with EXPLORER_TX_URLS
 * ("network.environment=https://…/{tx}", comma-separated): its own explorer, or another public one.
 */
export const defaultExplorers: Readonly<Record<string, { live: string; test: string }>> = {
  bitcoin: { live: "https://mempool.space/tx/{tx}", test: "https://mempool.space/testnet4/tx/{tx}" },
  ethereum: { live: "https://etherscan.io/tx/{tx}", test: "https://sepolia.etherscan.io/tx/{tx}" },
  polygon: { live: "https://polygonscan.com/tx/{tx}", test: "https://amoy.polygonscan.com/tx/{tx}" },
  base: { live: "https://basescan.org/tx/{tx}", test: "https://sepolia.basescan.org/tx/{tx}" },
  arbitrum: { live: "https://arbiscan.io/tx/{tx}", test: "https://sepolia.arbiscan.io/tx/{tx}" },
  tron: { live: "https://tronscan.org/#/transaction/{tx}", test: "https://nile.tronscan.org/#/transaction/{tx}" },
  solana: { live: "https://explorer.solana.com/tx/{tx}", test: "https://explorer.solana.com/tx/{tx}?cluster=devnet" },
};

/** Explorer URL templates by "network.environment". */
export type Explorers = ReadonlyMap<string, string>;

/** The defaults with EXPLORER_TX_URLS over them; a malformed entry throws, naming it. */
export function explorersFrom(setting: string | undefined): Explorers {
  const out = new Map<string, string>();
  for (const [network, urls] of Object.entries(defaultExplorers)) {
    out.set(`${network}.live`, urls.live);
    out.set(`${network}.test`, urls.test);
  }
  for (const entry of (setting ?? "").split(",").map((x) => x.trim()).filter(Boolean)) {
    const m = /^([a-z]+)\.(live|test)=(https:\/\/\S+)$/.exec(entry);
    if (!m || !m[3]!.includes("{tx}")) throw new Error(`EXPLORER_TX_URLS: "${entry}" is not network.live|test=https://…{tx}`);
    out.set(`${m[1]}.${m[2]}`, m[3]!);
  }
  return out;
}

/** A transaction's explorer URL, or undefined where none is known. */
export function explorerUrl(explorers: Explorers, network: string, environment: string, txHash: string): string | undefined {
  const template = explorers.get(`${network}.${environment}`);
  return template?.replace("{tx}", encodeURIComponent(txHash));
}
