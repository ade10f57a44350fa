// A local EVM dev chain on Foundry's anvil: the Test token contracts of the asset table placed at
// their addresses, a funded payer, and payments made with real signed transactions. Used by
// `npm run devchain`, `npm run pay`, the watcher's tests and its bench.
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import solc from "solc";
import {
  createPublicClient,
  createTestClient,
  createWalletClient,
  encodeFunctionData,
  http,
  parseUnits,
  type Hex,
  type PublicClient,
  type TestClient,
  type WalletClient,
} from "viem";
import { privateKeyToAccount, type PrivateKeyAccount } from "viem/accounts";
import { tronToHex20 } from "../../services/addresses/formats.ts";
import { assets, evmChainIds, type EvmNetwork } from "../../services/vocabulary/assets.ts";
import { tronChainIds } from "../../services/watcher/tron-source.ts";

/** anvil's first default account (its well-known test mnemonic): never a real key. */
export const payerKey: Hex = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";

export const tokenAbi = [
  { type: "function", name: "mint", stateMutability: "nonpayable", inputs: [{ name: "to", type: "address" }, { name: "value", type: "uint256" }], outputs: [] },
  { type: "function", name: "transfer", stateMutability: "nonpayable", inputs: [{ name: "to", type: "address" }, { name: "value", type: "uint256" }], outputs: [{ type: "bool" }] },
  {
    type: "function",
    name: "transferBoth",
    stateMutability: "nonpayable",
    inputs: [{ name: "a", type: "address" }, { name: "va", type: "uint256" }, { name: "b", type: "address" }, { name: "vb", type: "uint256" }],
    outputs: [{ type: "bool" }],
  },
  { type: "function", name: "balanceOf", stateMutability: "view", inputs: [{ name: "a", type: "address" }], outputs: [{ type: "uint256" }] },
] as const;

let runtimeCode: Hex | undefined;

/** The test token's runtime bytecode, compiled from TestToken.sol with solc (once per process). */
export function testTokenCode(): Hex {
  if (runtimeCode) return runtimeCode;
  const source = readFileSync(path.join(import.meta.dirname, "TestToken.sol"), "utf8");
  const input = {
    language: "Solidity",
    sources: { "TestToken.sol": { content: source } },
    settings: { optimizer: { enabled: true, runs: 200 }, outputSelection: { "*": { TestToken: ["evm.deployedBytecode.object"] } } },
  };
  const out = JSON.parse(solc.compile(JSON.stringify(input))) as {
    errors?: { severity: string; formattedMessage: string }[];
    contracts?: Record<string, Record<string, { evm: { deployedBytecode: { object: string } } }>>;
  };
  const errors = (out.errors ?? []).filter((e) => e.severity === "error");
  if (errors.length > 0) throw new Error(`TestToken.sol: ${errors.map((e) => e.formattedMessage).join("\n")}`);
  runtimeCode = `0x${out.contracts?.["TestToken.sol"]?.TestToken?.evm.deployedBytecode.object}` as Hex;
  return runtimeCode;
}

/** The anvil binary of the platform package (a devDependency). */
export function anvilPath(): string {
  const require = createRequire(import.meta.url);
  return path.join(path.dirname(require.resolve("@foundry-rs/anvil-linux-amd64/package.json")), "bin", "anvil");
}

export interface DevChain {
  url: string;
  port: number;
  chainId: number;
  public: PublicClient;
  test: TestClient;
  wallet: WalletClient;
  payer: PrivateKeyAccount;
  /** The Test contract of each token of `network` in the asset table, by asset (tron's in their 20-byte form). */
  tokens: Record<string, Hex>;
  stop(): Promise<void>;
  /** Kills anvil without a chance to save anything (its state is in memory: the chain is gone). */
  process: ChildProcess;
}

export interface DevChainOptions {
  /** 0: a free port. */
  port?: number;
  chainId?: number;
  /** Unset: no mining until asked (evm_mine); else a block every this many seconds. */
  blockTimeSeconds?: number;
  /**
   * tron: anvil standing in for a TRON node's Ethereum-compatible JSON-RPC, with Nile's chain id
   * and the Test USDT (TRC-20) contract's bytecode at its 20-byte address: TRC-20 Transfer logs
   * have ERC-20's topic and layout, and TRON's JSON-RPC writes addresses in that 20-byte form.
   */
  network?: DevNetwork;
  host?: string;
  /**
   * Block 0's time, and every later block 12 s after the one before: two chains started alike and
   * given the same transactions are the same blocks, hash for hash (a test's two branches of one chain).
   */
  genesisTimestamp?: number;
}

export type DevNetwork = EvmNetwork | "tron";

/** Each network's Test chain id (Sepolia's, Amoy's, Base Sepolia's, Arbitrum Sepolia's, Nile's): the dev chain stands in for that testnet. */
const devChainIds: Record<DevNetwork, number> = {
  ethereum: evmChainIds.ethereum.test,
  polygon: evmChainIds.polygon.test,
  base: evmChainIds.base.test,
  arbitrum: evmChainIds.arbitrum.test,
  tron: tronChainIds.nile,
};

/** The network a dev chain stands in for, from its chain id (each network's Test chain id is its own). */
export function devNetworkOf(chainId: number): DevNetwork | undefined {
  return (Object.keys(devChainIds) as DevNetwork[]).find((n) => devChainIds[n] === chainId);
}

/** The testnet each network's dev chain takes its chain id from, as people name it. */
export const devTestnetNames: Record<DevNetwork, string> = {
  ethereum: "Sepolia",
  polygon: "Polygon Amoy",
  base: "Base Sepolia",
  arbitrum: "Arbitrum Sepolia",
  tron: "TRON Nile",
};

/** The asset table's Test token contracts of `network`, by asset, as the chain's JSON-RPC writes them (tron's T… addresses as 20-byte hex). */
export function devTokens(network: DevNetwork): Record<string, Hex> {
  const tokens: Record<string, Hex> = {};
  // A token with no Test contract (Live only) has nothing to place on a dev chain.
  for (const a of assets.filter((a) => a.network === network && a.contract?.test)) {
    const test = a.contract?.test as string;
    tokens[a.asset] = (network === "tron" ? tronToHex20(test) : test) as Hex;
  }
  return tokens;
}

/** Starts anvil, places the Test tokens of `network` at their asset-table addresses, and mints the payer 1,000,000 of each. */
export async function startDevChain(o: DevChainOptions = {}): Promise<DevChain> {
  const network = o.network ?? "ethereum";
  const chainId = o.chainId ?? devChainIds[network];
  const args = ["--port", String(o.port ?? 0), "--host", o.host ?? "127.0.0.1", "--chain-id", String(chainId)];
  args.push(...(o.blockTimeSeconds ? ["--block-time", String(o.blockTimeSeconds)] : ["--no-mining"]));
  if (o.genesisTimestamp !== undefined) args.push("--timestamp", String(o.genesisTimestamp));
  const child = spawn(anvilPath(), args, { stdio: ["ignore", "pipe", "pipe"] });
  const port = await new Promise<number>((resolve, reject) => {
    let out = "";
    const timer = setTimeout(() => reject(new Error(`anvil did not start: ${out.slice(-500)}`)), 20_000);
    child.stdout.on("data", (d: Buffer) => {
      out += d.toString();
      const m = /Listening on [^\s:]+:(\d+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    child.stderr.on("data", (d: Buffer) => (out += d.toString()));
    child.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`anvil exited (${code}): ${out.slice(-500)}`));
    });
  });
  child.stdout.resume();
  const url = `http://${o.host ?? "127.0.0.1"}:${port}`;
  const transport = http(url, { retryCount: 0 });
  const payer = privateKeyToAccount(payerKey);
  const chain = { id: chainId, name: `dev ${network}`, nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 }, rpcUrls: { default: { http: [url] } } };
  const publicClient = createPublicClient({ chain, transport, pollingInterval: 100 });
  const test = createTestClient({ chain, mode: "anvil", transport });
  const wallet = createWalletClient({ chain, transport, account: payer });
  const tokens = devTokens(network);
  if (o.genesisTimestamp !== undefined) await test.request({ method: "anvil_setBlockTimestampInterval" as never, params: [12] as never });
  const code = testTokenCode();
  const mints: Hex[] = [];
  for (const [asset, address] of Object.entries(tokens)) {
    const decimals = assets.find((a) => a.network === network && a.asset === asset)?.decimals as number;
    await test.setCode({ address, bytecode: code });
    mints.push(await wallet.sendTransaction({ to: address, data: encodeFunctionData({ abi: tokenAbi, functionName: "mint", args: [payer.address, parseUnits("1000000", decimals)] }) }));
  }
  if (!o.blockTimeSeconds) await test.mine({ blocks: 1 });
  for (const hash of mints) await publicClient.waitForTransactionReceipt({ hash, pollingInterval: 100 });
  let stopped: Promise<void> | undefined;
  return {
    url,
    port,
    chainId,
    public: publicClient as PublicClient,
    test,
    wallet,
    payer,
    tokens,
    process: child,
    stop: () =>
      (stopped ??= new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once("exit", () => resolve());
        child.kill("SIGTERM");
      })),
  };
}

/** Clients on a running dev chain (one `npm run devchain` started): the payer's wallet and the Test tokens' addresses. */
export async function connectDevChain(url: string, network: DevNetwork = "ethereum"): Promise<Omit<DevChain, "stop" | "process" | "port">> {
  const transport = http(url, { retryCount: 0 });
  const probe = createPublicClient({ transport });
  const chainId = await probe.getChainId();
  const chain = { id: chainId, name: `dev ${network}`, nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 }, rpcUrls: { default: { http: [url] } } };
  const payer = privateKeyToAccount(payerKey);
  const tokens = devTokens(network);
  return {
    url,
    chainId,
    public: createPublicClient({ chain, transport, pollingInterval: 100 }) as PublicClient,
    test: createTestClient({ chain, mode: "anvil", transport }),
    wallet: createWalletClient({ chain, transport, account: payer }),
    payer,
    tokens,
  };
}

/**
 * A signed payment from the payer: `amount` of `asset` (the native coin, or a token of the asset
 * table) to `to`. Returns the raw transaction (to send again after a reorg: the same hash) and its hash.
 */
export async function signPayment(dev: Pick<DevChain, "tokens" | "wallet" | "payer" | "public">, to: Hex, amount: string, asset: string, decimals: number, nonce?: number): Promise<{ raw: Hex; hash: Hex }> {
  const token = dev.tokens[asset];
  const request = await dev.wallet.prepareTransactionRequest({
    account: dev.payer,
    chain: dev.wallet.chain,
    ...(nonce === undefined ? {} : { nonce }),
    ...(token
      ? { to: token, data: encodeFunctionData({ abi: tokenAbi, functionName: "transfer", args: [to, parseUnits(amount, decimals)] }) }
      : { to, value: parseUnits(amount, decimals) }),
  });
  const raw = await dev.wallet.signTransaction({ ...request, account: dev.payer, chain: dev.wallet.chain } as Parameters<WalletClient["signTransaction"]>[0]);
  const hash = await dev.public.sendRawTransaction({ serializedTransaction: raw });
  return { raw, hash };
}
