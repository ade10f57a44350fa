// The local dev chain for Test payments with real transactions:
//   npm run devchain                          anvil on 127.0.0.1:8545 (DEVCHAIN_PORT), a block every
//                                             second, the Test tokens at the asset table's addresses
//   npm run devchain -- tron                  the same standing in for a TRON node: Nile's chain id,
//                                             the Test USDT (TRC-20) contract at its 20-byte address
//   npm run -s pay -- <pi_… | address> <amount> [asset]   pays from the dev chain's funded account: an
//                                             intent id pays its deposit address in its asset; an
//                                             address pays in the asset of the intent that has it when
//                                             the server's database is found, else USDC (USDT for a T…
//                                             address), and says which
import { existsSync, readFileSync } from "node:fs";
import { createServer } from "node:net";
import path from "node:path";
import { formatUnits, type Hex } from "viem";
import { tronToHex20 } from "../services/addresses/formats.ts";
import { checkAmount } from "../services/vocabulary/amount.ts";
import { findAsset } from "../services/vocabulary/assets.ts";
import { loadConfig } from "../services/platform/config.ts";
import { createLogger } from "../services/platform/logger.ts";
import { openDatabase } from "../services/app/database.ts";
import { reachable } from "../services/app/embedded-nats.ts";
import { cliDatabase, resolveDatabase } from "../services/app/resources.ts";
import { connectDevChain, signPayment, startDevChain, tokenAbi, type DevNetwork } from "./devchain/chain.ts";

const [command, ...args] = process.argv.slice(2);
const fail = (message: string): never => {
  process.stderr.write(`devchain: ${message}\n`);
  process.exit(1);
};

interface IntentRow {
  public_id: string;
  network: string;
  asset: string;
  deposit_address: string | null;
  /** An intent offering several payment methods: each one's network, asset and address. */
  methods: { network: string; asset: string; deposit_address: string }[] | null;
}

/**
 * The intent with this public id or deposit address, from the server's database as the admin CLI
 * finds it; undefined when there is none, or (for an address) no database is known or running:
 * looking up an address must never start an embedded PostgreSQL of its own.
 */
async function findIntent(key: string, byId: boolean): Promise<IntentRow | undefined> {
  const config = loadConfig();
  const { config: dbConfig } = cliDatabase(config);
  if (!dbConfig.databaseUrl && !byId) {
    const settings = path.join(config.dataDir, "embedded.json");
    const port = existsSync(settings) ? (JSON.parse(readFileSync(settings, "utf8")) as { pgPort?: number }).pgPort : undefined;
    if (port === undefined || !(await reachable("127.0.0.1", port))) return undefined;
  }
  const resources = await resolveDatabase(dbConfig, createLogger("warn", 2));
  const db = await openDatabase(resources.databaseUrl, 1);
  try {
    const rows = await db.em.fork().execute<IntentRow[]>(
      byId
        ? `select id as public_id, network, asset, deposit_address, methods from payment_intents where id = ?`
        : `select id as public_id, network, asset, deposit_address, methods from payment_intents where lower(deposit_address) = lower(?) order by created_at desc limit 1`,
      [key],
    );
    const row = rows[0];
    // Several methods, none chosen yet: the dev chains pay the first of theirs (which chooses it).
    const payable = row && row.deposit_address === null ? row.methods?.find((m) => m.network === "ethereum" || m.network === "tron") : undefined;
    return payable ? { ...row!, network: payable.network, asset: payable.asset, deposit_address: payable.deposit_address } : row;
  } finally {
    await db.close();
    await resources.stopDatabase();
  }
}

if (command === "pay") {
  const [target, amount, named] = args;
  const url = process.env.DEVCHAIN_URL ?? `http://127.0.0.1:${process.env.DEVCHAIN_PORT ?? 8545}`;
  const usage = "usage: npm run -s pay -- <pi_… intent id | 0x deposit address> <amount> [ETH|USDC|USDT], or <T… deposit address> <amount> [USDT]";
  const byId = target?.startsWith("pi_") === true;
  if (!target || !amount || !/^\d+(\.\d+)?$/.test(amount)) fail(usage);
  let intent: IntentRow | undefined;
  if (byId || named === undefined) {
    try {
      intent = await findIntent(target as string, byId);
    } catch (err) {
      if (byId) fail(`could not read intent ${target} from the server's database: ${(err as Error).message.split("\n")[0]}`);
    }
    if (byId && !intent) fail(`no intent ${target} in the server's database (DATABASE_URL, or the one a server started here uses)`);
    if (byId && (!intent!.deposit_address || !["ethereum", "tron"].includes(intent!.network))) {
      fail(`intent ${target} is a ${intent!.network} ${intent!.asset} intent${intent!.deposit_address ? "" : " without a deposit address"}: the dev chain pays ethereum and tron intents`);
    }
  }
  const to = byId ? (intent!.deposit_address as string) : (target as string);
  // A T… deposit address is a tron intent's: paid on the tron dev chain, to its 20-byte form.
  const tron = tronToHex20(to);
  const network: DevNetwork = tron ? "tron" : "ethereum";
  if (!(tron || /^0x[0-9a-fA-F]{40}$/.test(to))) fail(usage);
  const asset = named ?? intent?.asset ?? (tron ? "USDT" : "USDC");
  // Said whenever the asset was not named: sending the default to an intent of another asset went unnoticed.
  const why = named !== undefined ? "" : intent ? ` (the asset of intent ${intent.public_id})` : ` (the default: no intent with this address found; name the asset to send another)`;
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
  process.stdout.write(`sent ${amount} ${asset}${why} to ${to} in ${hash}\n`);
  process.exit(0);
} else if (command === undefined || command === "tron") {
  const port = Number(process.env.DEVCHAIN_PORT ?? 8545);
  const network: DevNetwork = command === "tron" ? "tron" : "ethereum";
  const inUse = () => fail(`127.0.0.1:${port} is in use (DEVCHAIN_PORT=${port}): stop what listens there (a dev chain started before?), or set DEVCHAIN_PORT to a free port, in every terminal that pays`);
  // Checked before anvil starts: its own refusal ("Address already in use (os error 98)") names no setting.
  const free = await new Promise<boolean>((resolve) => {
    const probe = createServer();
    probe.once("error", () => resolve(false));
    probe.listen(port, "127.0.0.1", () => probe.close(() => resolve(true)));
  });
  if (!free) inUse();
  // Installed before anvil is spawned: a SIGTERM during its start still stops it, once it can be stopped.
  let dev: Awaited<ReturnType<typeof startDevChain>> | undefined;
  let stopping = false;
  const stop = () => {
    stopping = true;
    if (dev) void dev.stop().then(() => process.exit(0));
  };
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);
  process.on("SIGHUP", stop);
  try {
    dev = await startDevChain({ port, blockTimeSeconds: 1, network });
  } catch (err) {
    const message = (err as Error).message;
    if (/Address already in use/i.test(message)) inUse();
    fail(`could not start anvil on 127.0.0.1:${port}: ${message.split("\n")[0]}`);
  }
  const d = dev!;
  if (stopping) stop();
  // anvil gone on its own (killed, crashed): this process has nothing left to stand for.
  d.process.once("exit", (code, signal) => {
    if (!stopping) fail(`anvil exited (${signal ?? code})`);
  });
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
    `  npm run -s pay -- <pi_… intent id | deposit_address> <amount>${tron ? "" : " [ETH|USDC|USDT]"}   (the intent's asset unless named)`,
  ];
  process.stdout.write(["", ...lines, ""].join("\n") + "\n");
} else {
  fail(`unknown command "${command}": npm run devchain [-- tron], or npm run -s pay -- <pi_… | address> <amount> [asset]`);
}
