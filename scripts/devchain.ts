// The local dev chain for Test payments with real transactions:
//   npm run devchain [-- ethereum|polygon|base|arbitrum]   anvil on 127.0.0.1:8545 (DEVCHAIN_PORT)
//                                             with the network's Test chain id, a block every second,
//                                             the Test tokens at the asset table's addresses
//   npm run devchain -- tron                  the same standing in for a TRON node: Nile's chain id,
//                                             the Test USDT (TRC-20) contract at its 20-byte address
//   npm run -s pay -- <pi_… | address> <amount> [asset]   pays from the dev chain's funded account, on
//                                             the network its chain id stands for: an intent id pays its
//                                             deposit address there (an intent of several methods, the
//                                             method on that network) in its asset; an address pays in
//                                             the asset of the intent that has it when the server's
//                                             database is found, else USDC (USDT on tron), and says which
import { existsSync, readFileSync } from "node:fs";
import { createServer } from "node:net";
import path from "node:path";
import { formatUnits, type Hex } from "viem";
import { tronToHex20 } from "../services/addresses/formats.ts";
import { checkAmount } from "../services/vocabulary/amount.ts";
import { assets, findAsset, notOfferedReason, offeredIn, type AssetInfo } from "../services/vocabulary/assets.ts";
import { loadConfig } from "../services/platform/config.ts";
import { createLogger } from "../services/platform/logger.ts";
import { openDatabase } from "../services/app/database.ts";
import { reachable } from "../services/platform/reachable.ts";
import { cliDatabase, resolveDatabase } from "../services/app/resources.ts";
import { connectDevChain, devNetworkOf, devTestnetNames, signPayment, startDevChain, tokenAbi, type DevNetwork } from "./devchain/chain.ts";

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
    return rows[0];
  } finally {
    await db.close();
    await resources.stopDatabase();
  }
}

/** The chain id a dev chain answers with, or undefined when nothing answers at `url`. */
async function chainIdAt(url: string): Promise<number | undefined> {
  try {
    const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_chainId", params: [] }), signal: AbortSignal.timeout(5_000) });
    const body = (await res.json()) as { result?: string };
    return body.result === undefined ? undefined : Number(body.result);
  } catch {
    return undefined;
  }
}

if (command === "pay") {
  const [target, amount, named] = args;
  const url = process.env.DEVCHAIN_URL ?? `http://127.0.0.1:${process.env.DEVCHAIN_PORT ?? 8545}`;
  const usage = "usage: npm run -s pay -- <pi_… intent id | 0x deposit address> <amount> [ETH|USDC|USDT], or <T… deposit address> <amount> [USDT]";
  const byId = target?.startsWith("pi_") === true;
  if (!target || !amount || !/^\d+(\.\d+)?$/.test(amount)) fail(usage);
  if (!byId && !(tronToHex20(target as string) || /^0x[0-9a-fA-F]{40}$/.test(target as string))) fail(usage);
  let intent: IntentRow | undefined;
  if (byId || named === undefined) {
    try {
      intent = await findIntent(target as string, byId);
    } catch (err) {
      if (byId) fail(`could not read intent ${target} from the server's database: ${(err as Error).message.split("\n")[0]}`);
    }
    if (byId && !intent) fail(`no intent ${target} in the server's database (DATABASE_URL, or the one a server started here uses)`);
  }
  // A T… address is tron's; otherwise an intent's own network, or (an address of no intent known) ethereum: checked
  // against the running chain below, which says which network it stands for.
  const assumed: DevNetwork = tronToHex20(target as string) ? "tron" : "ethereum";
  // Rounding to the token's units would send another amount than the one printed as sent; checked before the chain is asked.
  const early = named ?? (intent?.deposit_address ? intent.asset : undefined) ?? (assumed === "tron" ? "USDT" : "USDC");
  const earlyInfo = findAsset(assumed, early) ?? findAsset(intent?.network ?? assumed, early);
  if (assumed === "tron" && !earlyInfo?.contract) fail(`unknown asset "${early}" on the tron dev chain: USDT`);
  if (earlyInfo) {
    const checked = checkAmount(amount as string, earlyInfo.decimals);
    if (!checked.ok) fail(`amount ${amount} ${checked.reason.replace("this asset", early)}; nothing was sent`);
  }
  const chainId = await chainIdAt(url);
  const network = chainId === undefined ? undefined : devNetworkOf(chainId);
  if (network === undefined) {
    const start = intent?.deposit_address && intent.network !== "ethereum" ? ` -- ${intent.network}` : assumed === "tron" ? " -- tron" : "";
    fail(
      chainId === undefined
        ? `no dev chain answers at ${url}: start one with npm run devchain${start} (or set DEVCHAIN_URL)`
        : `the chain at ${url} has chain id ${chainId}, no dev chain's (npm run devchain -- ethereum|polygon|base|arbitrum|tron)`,
    );
  }
  const on = network as DevNetwork;
  // An intent of several methods not chosen yet: the one on this chain's network (paying it chooses it).
  if (intent && intent.deposit_address === null) {
    const method = intent.methods?.find((m) => m.network === on);
    if (!method) fail(`intent ${intent.public_id} offers ${(intent.methods ?? []).map((m) => `${m.asset} on ${m.network}`).join(", ")}, none on ${on}, which the dev chain at ${url} stands for: start one with npm run devchain -- <network>`);
    intent = { ...intent, network: on, asset: method!.asset, deposit_address: method!.deposit_address };
  }
  if (intent && intent.network !== on) {
    fail(`intent ${intent.public_id} is a ${intent.network} ${intent.asset} intent, and the dev chain at ${url} stands for ${on} (chain id ${chainId}): start one with npm run devchain -- ${intent.network}`);
  }
  const to = byId ? (intent!.deposit_address as string) : (target as string);
  const tron = tronToHex20(to);
  if ((on === "tron") !== (tron !== undefined)) fail(`${to} is ${tron ? "a tron" : "an EVM"} address, and the dev chain at ${url} stands for ${on}`);
  const asset = named ?? intent?.asset ?? (tron ? "USDT" : "USDC");
  // Said whenever the asset was not named: sending the default to an intent of another asset went unnoticed.
  const why = named !== undefined ? "" : intent ? ` (the asset of intent ${intent.public_id})` : ` (the default: no intent with this address found; name the asset to send another)`;
  const info = findAsset(on, asset);
  // The dev chain stands for the testnet: only what has a Test contract (or is the native coin) is on it.
  const onChain = (a: AssetInfo) => offeredIn(a, "test") && (on !== "tron" || a.contract !== undefined);
  if (!info || !onChain(info)) fail(`unknown asset "${asset}" on the ${on} dev chain: ${assets.filter((a) => a.network === on && onChain(a)).map((a) => a.asset).join(", ")}${info ? ` (${notOfferedReason(info, "test")})` : ""}`);
  const checked = checkAmount(amount as string, info!.decimals);
  if (!checked.ok) fail(`amount ${amount} ${checked.reason.replace("this asset", asset)}; nothing was sent`);
  const dev = await connectDevChain(url, on);
  const { hash } = await signPayment(dev, (tron ?? to) as Hex, amount as string, asset, info!.decimals);
  process.stdout.write(`sent ${amount} ${asset}${why} to ${to} on ${on} in ${hash}\n`);
  process.exit(0);
} else if (command === undefined || Object.hasOwn(devTestnetNames, command)) {
  const port = Number(process.env.DEVCHAIN_PORT ?? 8545);
  const network = (command ?? "ethereum") as DevNetwork;
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
  const follow = `${network.toUpperCase()}_TEST_RPC_URL=${d.url} ${network.toUpperCase()}_CONFIRMATIONS=2`;
  const tokens = await Promise.all(Object.entries(d.tokens).map(async ([asset, address]) => ({ asset, address, balance: await balanceOf(address) })));
  const lines = [
    tron
      ? `Local Tron dev chain: anvil on ${d.url}, chain id ${d.chainId} (TRON Nile's), a block every second, standing in for a TRON node's\nEthereum-compatible JSON-RPC; the chain lives in memory until you stop it.`
      : `Local dev chain: anvil on ${d.url}, chain id ${d.chainId} (${devTestnetNames[network]}'s: it stands for ${network}), a block every second; the chain lives in memory until you stop it.`,
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
    tron ? "Pay a Test intent's T… deposit address (network tron, asset USDT):" : `Pay a Test intent's deposit address on ${network} (an intent of several methods: its ${network} one):`,
    `  npm run -s pay -- <pi_… intent id | deposit_address> <amount>${tron ? "" : ` [${assets.filter((a) => a.network === network).map((a) => a.asset).join("|")}]`}   (the intent's asset unless named)`,
  ];
  process.stdout.write(["", ...lines, ""].join("\n") + "\n");
} else {
  fail(`unknown command "${command}": npm run devchain [-- ethereum|polygon|base|arbitrum|tron], or npm run -s pay -- <pi_… | address> <amount> [asset]`);
}
