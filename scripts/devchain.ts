// The local dev chain for Test payments with real transactions:
//   npm run devchain                          anvil on 127.0.0.1:8545 (DEVCHAIN_PORT), a block every
//                                             second, the Test tokens at the asset table's addresses
//   npm run -s pay -- <address> <amount> [asset]   pays from the dev chain's funded account (USDC by default)
import { formatUnits } from "viem";
import { checkAmount } from "../services/vocabulary/amount.ts";
import { findAsset } from "../services/vocabulary/assets.ts";
import { connectDevChain, signPayment, startDevChain, tokenAbi } from "./devchain/chain.ts";

const [command, ...args] = process.argv.slice(2);
const fail = (message: string): never => {
  process.stderr.write(`devchain: ${message}\n`);
  process.exit(1);
};

if (command === "pay") {
  const [to, amount, asset = "USDC"] = args;
  const url = process.env.DEVCHAIN_URL ?? `http://127.0.0.1:${process.env.DEVCHAIN_PORT ?? 8545}`;
  if (!to || !/^0x[0-9a-fA-F]{40}$/.test(to) || !amount || !/^\d+(\.\d+)?$/.test(amount)) fail("usage: npm run -s pay -- <0x deposit address> <amount> [ETH|USDC|USDT]");
  const info = findAsset("ethereum", asset);
  if (!info) fail(`unknown asset "${asset}": ETH, USDC or USDT`);
  // Rounding to the token's units would send another amount than the one printed as sent.
  const checked = checkAmount(amount as string, info!.decimals);
  if (!checked.ok) fail(`amount ${amount} ${checked.reason.replace("this asset", asset)}; nothing was sent`);
  let dev;
  try {
    dev = await connectDevChain(url);
  } catch {
    fail(`no dev chain answers at ${url}: start one with npm run devchain (or set DEVCHAIN_URL)`);
  }
  const { hash } = await signPayment(dev!, to as `0x${string}`, amount as string, asset, info!.decimals);
  process.stdout.write(`sent ${amount} ${asset} to ${to} in ${hash}\n`);
  process.exit(0);
} else if (command === undefined) {
  const port = Number(process.env.DEVCHAIN_PORT ?? 8545);
  let dev;
  try {
    dev = await startDevChain({ port, blockTimeSeconds: 1 });
  } catch (err) {
    fail(`could not start anvil on 127.0.0.1:${port}: ${(err as Error).message.split("\n")[0]}`);
  }
  const d = dev!;
  const balances = await Promise.all(
    Object.entries(d.tokens).map(async ([asset, address]) => `${formatUnits(await d.public.readContract({ address, abi: tokenAbi, functionName: "balanceOf", args: [d.payer.address] }), 6)} ${asset}`),
  );
  const eth = formatUnits(await d.public.getBalance({ address: d.payer.address }), 18);
  process.stdout.write(
    [
      "",
      `Local dev chain: anvil on ${d.url}, chain id ${d.chainId} (Sepolia's), a block every second; the chain lives in memory until you stop it.`,
      ...Object.entries(d.tokens).map(([asset, address]) => `  Test ${asset}  ${address} (the asset table's Test contract)`),
      `  payer      ${d.payer.address}: ${balances.join(", ")}, ${eth} ETH (anvil's well-known test account)`,
      "",
      "Run the service following it (in another terminal), with the README's local webhook receiver:",
      `  ETHEREUM_TEST_RPC_URL=${d.url} ETHEREUM_CONFIRMATIONS=2 WEBHOOK_CONNECT_TO=hooks.local.test:443:127.0.0.1:\${HOOK_PORT:-8443} NODE_EXTRA_CA_CERTS=$PWD/hook.crt npm start`,
      "or without one:",
      `  ETHEREUM_TEST_RPC_URL=${d.url} ETHEREUM_CONFIRMATIONS=2 npm start`,
      "Pay a Test intent's deposit address:",
      "  npm run -s pay -- <deposit_address> <amount> [ETH|USDC|USDT]",
      "",
    ].join("\n") + "\n",
  );
  const stop = () => void d.stop().then(() => process.exit(0));
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);
} else {
  fail(`unknown command "${command}": npm run devchain, or npm run -s pay -- <address> <amount> [asset]`);
}
