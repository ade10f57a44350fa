// The local dev chain for Test payments with real transactions:
//   npm run devchain                          anvil on 127.0.0.1:8545 (DEVCHAIN_PORT), a block every
//                                             second, the Test tokens at the asset table's addresses
//   npm run devchain -- tron                  the same standing in for a TRON node: Nile's chain id,
//                                             the Test USDT (TRC-20) contract at its 20-byte address
//   npm run -s pay -- <address> <amount> [asset]   pays from the dev chain's funded account (USDC by
//                                             default; a T… address pays USDT on the tron dev chain)
import { formatUnits, type Hex } from "viem";
import { tronToHex20 } from "../services/addresses/formats.ts";
import { checkAmount } from "../services/vocabulary/amount.ts";
import { findAsset } from "../services/vocabulary/assets.ts";
import { connectDevChain, signPayment, startDevChain, tokenAbi, type DevNetwork } from "./devchain/chain.ts";

const [command, ...args] = process.argv.slice(2);
const fail = (message: string): never => {
  process.stderr.write(`devchain: ${message}\n`);
  process.exit(1);
};

if (command === "pay") {
  const [to, amount] = args;
  const url = process.env.DEVCHAIN_URL ?? `http://127.0.0.1:${process.env.DEVCHAIN_PORT ?? 8545}`;
  // A T… deposit address is a tron intent's: paid on the tron dev chain, to its 20-byte form.
  const tron = to === undefined ? undefined : tronToHex20(to);
  const network: DevNetwork = tron ? "tron" : "ethereum";
  const asset = args[2] ?? (tron ? "USDT" : "USDC");
  const usage = "usage: npm run -s pay -- <0x deposit address> <amount> [ETH|USDC|USDT], or <T… deposit address> <amount> [USDT]";
  if (!to || !(tron || /^0x[0-9a-fA-F]{40}$/.test(to)) || !amount || !/^\d+(\.\d+)?$/.test(amount)) fail(usage);
  const info = findAsset(network, asset);
  if (!info || (tron && !info.contract)) fail(`unknown asset "${asset}" on the ${network} dev chain: ${tron ? "USDT" : "ETH, USDC or USDT"}`);
  // Rounding to the token's units would send another amount than the one printed as sent.
  const checked = checkAmount(amount as string, info!.decimals);
  if (!checked.ok) fail(`amount ${amount} ${checked.reason.replace("this asset", asset)}; nothing was sent`);
  let dev;
  try {
    dev = await connectDevChain(url, network);
  } catch {
    fail(`no dev chain answers at ${url}: start one with npm run devchain${tron ? " -- tron" : ""} (or set DEVCHAIN_URL)`);
  }
  const { hash } = await signPayment(dev!, (tron ?? to) as Hex, amount as string, asset, info!.decimals);
  process.stdout.write(`sent ${amount} ${asset} to ${to} in ${hash}\n`);
  process.exit(0);
} else if (command === undefined || command === "tron") {
  const port = Number(process.env.DEVCHAIN_PORT ?? 8545);
  const network: DevNetwork = command === "tron" ? "tron" : "ethereum";
  let dev;
  try {
    dev = await startDevChain({ port, blockTimeSeconds: 1, network });
  } catch (err) {
    fail(`could not start anvil on 127.0.0.1:${port}: ${(err as Error).message.split("\n")[0]}`);
  }
  const d = dev!;
  const receiver = "WEBHOOK_CONNECT_TO=hooks.local.test:443:127.0.0.1:${HOOK_PORT:-8443} NODE_EXTRA_CA_CERTS=$PWD/hook.crt";
  const balanceOf = async (address: Hex) => formatUnits(await d.public.readContract({ address, abi: tokenAbi, functionName: "balanceOf", args: [d.payer.address] }), 6);
  const tron = network === "tron";
  const rpcUrl = tron ? "TRON_TEST_RPC_URL" : "ETHEREUM_TEST_RPC_URL";
  const follow = `${rpcUrl}=${d.url} ${tron ? "TRON" : "ETHEREUM"}_CONFIRMATIONS=2`;
  const tokens = await Promise.all(Object.entries(d.tokens).map(async ([asset, address]) => ({ asset, address, balance: await balanceOf(address) })));
  const lines = [
    tron
      ? `Local Tron dev chain: anvil on ${d.url}, chain id ${d.chainId} (TRON Nile's), a block every second, standing in for a TRON node's\nEthereum-compatible JSON-RPC; the chain lives in memory until you stop it.`
      : `Local dev chain: anvil on ${d.url}, chain id ${d.chainId} (Sepolia's), a block every second; the chain lives in memory until you stop it.`,
    ...tokens.map(({ asset, address }) =>
      tron
        ? `  Test ${asset}  ${findAsset("tron", asset)?.contract?.test} (the asset table's Test TRC-20 contract), here at its 20-byte form ${address}`
        : `  Test ${asset}  ${address} (the asset table's Test contract)`,
    ),
    `  payer      ${d.payer.address}: ${tokens.map((x) => `${x.balance} ${x.asset}`).join(", ")}${tron ? "" : `, ${formatUnits(await d.public.getBalance({ address: d.payer.address }), 18)} ETH`} (anvil's well-known test account)`,
    "",
    "Run the service following it (in another terminal), with the README's local webhook receiver:",
    `  ${follow} ${receiver} npm start`,
    "or without one:",
    `  ${follow} npm start`,
    tron ? "Pay a Test intent's T… deposit address (network tron, asset USDT):" : "Pay a Test intent's deposit address:",
    `  npm run -s pay -- <deposit_address> <amount>${tron ? "" : " [ETH|USDC|USDT]"}`,
  ];
  process.stdout.write(["", ...lines, ""].join("\n") + "\n");
  const stop = () => void d.stop().then(() => process.exit(0));
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);
} else {
  fail(`unknown command "${command}": npm run devchain [-- tron], or npm run -s pay -- <address> <amount> [asset]`);
}
