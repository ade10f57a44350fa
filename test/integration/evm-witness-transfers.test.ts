// A counted EVM transfer is told by a second node (issue 60). Two Live-like nodes (anvil with
// chain id 1 and mainnet's block 0 through our proxies, the Live USDC contract's address holding
// the test token) behind ETHEREUM_LIVE_RPC_URL=liar,honest. The read node lies consistently: a
// USDC Transfer to a deposit address that never happened, in its eth_getLogs (by range and by
// block hash), its receipt and its transaction, in a real block (hash
// real, so the batch's top agrees with the witness; its bloom already holding such a log): the
// watcher names the transfer no second node confirms in its log, in chain_unwitnessed_height and
// in `ops chains`. The same lie in a block whose bloom does not hold it is refused
// (chain_blocks_refused_total{check="logs_bloom"}): a block's bloom is one of its hashed fields.
// Or in an invented block (its hash its own fields') below a real top told with it as parent: the
// top's fields no longer hash to its hash, and it is refused (check="header"). No made-up transfer
// is ever counted, and once the node tells the truth again the chain goes on.
import t from "tap";
import { encodeFunctionData, pad, parseUnits, toHex, type Hex } from "viem";
import { signPayment, startDevChain, testTokenCode, tokenAbi } from "../../scripts/devchain/chain.ts";
import { findAsset, mainnetGenesis } from "../../services/vocabulary/assets.ts";
import { bloomOf } from "../../services/watcher/evm-bloom.ts";
import { evmHeaderHash } from "../../services/watcher/evm-header.ts";
import { transferTopic } from "../../services/watcher/evm-told.ts";
import { call, idemKey, merchantWithKey, until } from "../helpers/harness.ts";
import { runCli } from "../helpers/processes.ts";
import { memoryLog, metricValue } from "../helpers/reorg.ts";
import { startRpcProxy } from "../helpers/rpc-proxy.ts";
import { notDetected, signedEvents, webhookSetup } from "../helpers/webhooks.ts";

t.setTimeout(300_000);
type Json = Record<string, unknown>;
const mainnet = await startDevChain({ chainId: 1 });
t.teardown(() => mainnet.stop());
const usdc = (findAsset("ethereum", "USDC")?.contract?.live as string).toLowerCase() as Hex;
await mainnet.test.setCode({ address: usdc, bytecode: testTokenCode() });
const mint = await mainnet.wallet.sendTransaction({ account: mainnet.payer, chain: mainnet.wallet.chain, to: usdc, data: encodeFunctionData({ abi: tokenAbi, functionName: "mint", args: [mainnet.payer.address, parseUnits("1000000", 6)] }) });
await mainnet.test.mine({ blocks: 1 });
await mainnet.public.waitForTransactionReceipt({ hash: mint, pollingInterval: 100 });
const payer = { ...mainnet, tokens: { USDC: usdc } };

const node = await startRpcProxy(t, mainnet.url);
node.genesisHash = mainnetGenesis.ethereum;
const second = await startRpcProxy(t, mainnet.url);
second.genesisHash = mainnetGenesis.ethereum;
const log = memoryLog();
const s = await webhookSetup(t, {
  env: { OPERATOR_WATCHED_NETWORKS: "", ETHEREUM_LIVE_RPC_URL: `${node.url},${second.url}`, ETHEREUM_CONFIRMATIONS: "2", WATCHER_POLL_MS: "100" },
  logger: log.logger,
});
const live = await merchantWithKey(s.app, "live");
const endpoint = await s.createEndpoint("/hooks/live", live);
const intents = `/api/v1/merchants/${live.merchant}/payment-intents`;
const unwitnessed = () => metricValue(s.app.ports.ops, "chain_unwitnessed_height", { network: "ethereum", environment: "live" });

async function createIntent(amount: string): Promise<{ public_id: string; deposit_address: Hex }> {
  const res = await call(s.base, "POST", intents, { key: live.key, idempotencyKey: idemKey(), body: { network: "ethereum", asset: "USDC", requested_amount: amount } });
  if (res.status !== 200) throw new Error(`create: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data;
}
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const get = async (id: string): Promise<any> => (await call(s.base, "GET", `${intents}/${id}`, { key: live.key })).body.data;
const confirmed = (id: string) => until(`${id} confirmed`, async () => ((await get(id)).status === "confirmed" ? get(id) : undefined), 45_000, () => id);
const eventsOf = (id: string) => [...new Map(signedEvents(s.receiver, endpoint.secret).map((e) => [e.id, e])).values()].filter((e) => e.data.payment_intent?.public_id === id && notDetected(e)).map((e) => e.type);
const head = async () => Number(await mainnet.public.getBlockNumber({ cacheTime: 0 }));
const opsChains = async () => (await runCli("services/app/ops-cli.ts", { DATABASE_URL: s.databaseUrl }, "chains")).stdout;
const confirmLines = () => log.lines().filter((l) => Number(l.level) >= 40 && /no second node confirms a transfer/.test(String(l.msg)));

/** The real receipt and transaction of the mint, the shape every invented one is written in. */
const rpc = async (method: string, params: unknown[]) =>
  ((await (await fetch(mainnet.url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }) })).json()) as { result: Json }).result;
const template = { receipt: await rpc("eth_getTransactionReceipt", [mint]), tx: await rpc("eth_getTransactionByHash", [mint]) };

/** A block's logs bloom with `logs` added, as the node writes it. */
function bloomWith(bloom: string, logs: readonly { address: string; topics: string[] }[]): Hex {
  const out = Buffer.from(bloom.slice(2), "hex");
  bloomOf(logs).forEach((b, i) => (out[i] = (out[i] as number) | b));
  return `0x${out.toString("hex")}`;
}

/** The fake Transfer log's address and topics: what a bloom must hold for it. */
const logItems = (to: Hex) => ({ address: usdc, topics: [transferTopic, pad(mainnet.payer.address), pad(to)] });

/**
 * Makes the read node tell of a USDC transfer of `amount` to `to` by transaction `txHash`, in the
 * block at `height` as `blockOf` tells it (the real block as mined, or one made of it),
 * consistently: logs by range and by hash, receipt and transaction. `blockOf` rewrites the real
 * block wherever the node answers it (by number or hash); the block above names the told one as
 * its parent.
 */
function lie(o: { height: number; to: Hex; amount: bigint; txHash: Hex; blockOf: (real: Json) => Json }) {
  const fake = (block: Json) => ({
    ...logItems(o.to),
    data: pad(toHex(o.amount)),
    blockNumber: toHex(o.height),
    blockHash: block.hash as string,
    transactionHash: o.txHash,
    transactionIndex: "0x0",
    logIndex: "0x9",
    removed: false,
  });
  const toldBlock = async (ask: (m: string, p: unknown[]) => Promise<unknown>) => {
    const real = (await ask("eth_getBlockByNumber", [toHex(o.height), false])) as Json | null;
    if (!real) return undefined;
    const told = o.blockOf(real);
    return { block: { ...told, hash: String(told.hash) }, log: fake(told), realHash: String(real.hash) };
  };
  node.intercept = async (method, params, ask) => {
    if (method === "eth_getBlockByNumber" || method === "eth_getBlockByHash") {
      const told = await toldBlock(ask);
      if (!told) return undefined;
      const isIt = method === "eth_getBlockByNumber" ? params[0] === toHex(o.height) : params[0] === told.block.hash;
      if (isIt) {
        if (params[1] !== true) return told.block;
        // Asked with its transactions: the told header over the real block's transactions, not their hashes.
        const full = (await ask("eth_getBlockByNumber", [toHex(o.height), true])) as Json;
        return { ...full, ...told.block, transactions: full.transactions };
      }
      // The block above names the told one as its parent.
      if (method === "eth_getBlockByNumber" && params[0] === toHex(o.height + 1) && told.block.hash !== told.realHash) {
        const above = (await ask(method, params)) as Json | null;
        return above ? { ...above, parentHash: told.block.hash } : undefined;
      }
      return undefined;
    }
    if (method === "eth_getLogs") {
      const filter = params[0] as Json;
      const told = await toldBlock(ask);
      if (!told) return undefined;
      const covers = filter.blockHash !== undefined ? filter.blockHash === told.block.hash : Number(filter.fromBlock) <= o.height && o.height <= Number(filter.toBlock);
      if (!covers) return undefined;
      const real = (await ask(method, filter.blockHash === told.block.hash ? [{ ...filter, blockHash: told.realHash }] : params)) as Json[];
      const kept = told.block.hash === told.realHash ? real : real.filter((l) => Number(l.blockNumber) !== o.height);
      return [...kept, told.log].sort((a, b) => Number(a.blockNumber) - Number(b.blockNumber) || Number(a.logIndex) - Number(b.logIndex));
    }
    if ((method === "eth_getTransactionReceipt" || method === "eth_getTransactionByHash") && String(params[0]).toLowerCase() === o.txHash) {
      const told = await toldBlock(ask);
      if (!told) return null;
      const where = { blockHash: told.block.hash, blockNumber: toHex(o.height), transactionHash: o.txHash, transactionIndex: "0x5" };
      if (method === "eth_getTransactionByHash") return { ...template.tx, ...where, hash: o.txHash, to: usdc, value: "0x0" };
      return { ...template.receipt, ...where, status: "0x1", to: usdc, logs: [told.log], logsBloom: bloomWith(`0x${"00".repeat(256)}`, [told.log]) };
    }
    return undefined;
  };
  return () => (node.intercept = undefined);
}

const refusedCount = async (check: string) => (await metricValue(s.app.ports.ops, "chain_blocks_refused_total", { network: "ethereum", environment: "live", check })) ?? 0;

await until("the Live chain followed", async () => {
  await mainnet.test.mine({ blocks: 1 });
  return /ethereum[^\n]*live[^\n]*yes|live[^\n]*ethereum/.test(await opsChains()) && (await metricValue(s.app.ports.ops, "chain_watcher_active", { network: "ethereum", environment: "live" })) === 1;
}, 60_000);

t.test("a transfer the read node adds to a real block (its bloom already holds such a log), which no second node has, is never counted; the real one then counts alone", async (t) => {
  const intent = await createIntent("5000");
  const txHash = `0x${"5e".repeat(32)}` as Hex;
  // A real 1 USDC payment to the intent: its block's bloom holds a Transfer from the payer to it, so the made-up one beside it fits the bloom.
  await signPayment(payer, intent.deposit_address, "1", "USDC", 6);
  const height = (await head()) + 1;
  const stop = lie({ height, to: intent.deposit_address, amount: parseUnits("4999", 6), txHash, blockOf: (real) => real });
  await mainnet.test.mine({ blocks: 4 });
  let held: number | undefined;
  await until("the watcher holds back the block of the transfer no witness tells", async () => ((held = await unwitnessed()) ?? 0) === height, 30_000, () => String(held));
  const pi = await get(intent.public_id);
  t.same([pi.status, Number(pi.amount_received ?? 0), pi.transactions], ["pending", 0, []], "nothing of the block recorded: not the 4 999 made up, nor the real 1 beside it");
  t.match(await until("ops chains names it", async () => ((await opsChains()).includes(txHash) ? opsChains() : undefined), 30_000), new RegExp(`no second node confirms the transfer ${txHash}:1 of 4999 USDC`));
  t.equal(confirmLines().length, 1, "said once in the log");
  t.match(confirmLines()[0], { height, transfer: `${txHash}:1`, witnesses: ["it has no such mined transaction"] });

  stop();
  await mainnet.test.mine({ blocks: 1 });
  await until("the real payment recorded", async () => ((await get(intent.public_id)).transactions.length > 0 ? true : undefined), 30_000);
  await until("chain_unwitnessed_height back to 0", async () => !(await unwitnessed()), 10_000);
  const after = await get(intent.public_id);
  t.same([after.transactions.length, after.amount_received, after.status], [1, "1", "underpaid"], "once the node tells the truth the real 1 USDC counts, alone; the made-up 4 999 never");
  t.same(eventsOf(intent.public_id).filter((e) => e === "payment.confirmed"), [], "no payment.confirmed");
});

t.test("a transfer made up in a real block whose bloom does not hold it is refused (logs_bloom)", async (t) => {
  const intent = await createIntent("3000");
  const before = await refusedCount("logs_bloom");
  const height = (await head()) + 1;
  const txHash = `0x${"3b".repeat(32)}` as Hex;
  const stop = lie({ height, to: intent.deposit_address, amount: parseUnits("3000", 6), txHash, blockOf: (real) => real });
  await mainnet.test.mine({ blocks: 2 });
  await until("the block refused, named", async () => ((await refusedCount("logs_bloom")) > before ? true : undefined), 30_000);
  t.match(log.lines().find((l) => l.check === "logs_bloom" && l.height === height), { reason: new RegExp(`does not hold the Transfer ${txHash}`) }, "the log names the block and the transfer");
  t.same((await get(intent.public_id)).transactions, [], "nothing recorded");
  stop();
  const honest = await createIntent("12.5");
  await signPayment(payer, honest.deposit_address, "12.5", "USDC", 6);
  await mainnet.test.mine({ blocks: 3 });
  t.match(await confirmed(honest.public_id), { status: "confirmed", amount_received: "12.5" }, "the chain goes on once the node tells the truth: an honest USDC payment, confirmed by the witness, counts");
  t.same((await get(intent.public_id)).transactions, [], "the made-up transfer, never");
});

t.test("an invented block below a real top is refused: the top's own header names its real parent", async (t) => {
  const before = await refusedCount("header");
  const invented = await createIntent("7000");
  const height = (await head()) + 1;
  const txHash = `0x${"7a".repeat(32)}` as Hex;
  // The invented block is consistent with itself (its bloom holds its log, its hash is its
  // fields'); the real block above it is told with that block as its parent, its own hash
  // unchanged: a witness agrees with it.
  const inventedOf = (real: Json): Json => {
    const fields = { ...real, stateRoot: `0x${"1b".repeat(32)}`, logsBloom: bloomWith(String(real.logsBloom), [logItems(invented.deposit_address)]) };
    return { ...fields, hash: evmHeaderHash(fields), transactions: [] };
  };
  const stop = lie({ height, to: invented.deposit_address, amount: parseUnits("7000", 6), txHash, blockOf: inventedOf });
  // Both blocks at once: the invented one and the real one above it are read in one batch.
  await mainnet.test.mine({ blocks: 2 });
  await until("the block above the invented one refused, named", async () => ((await refusedCount("header")) > before ? true : undefined), 30_000);
  const line = log.lines().find((l) => l.check === "header" && l.height === height + 1 && /fails a check/.test(String(l.msg)));
  t.match(line, { check: "header", height: height + 1, reason: /its header's fields hash to 0x[0-9a-f]{64}, not the hash the node named/ }, "the log names the block whose parent was rewritten");
  t.same((await get(invented.public_id)).transactions, [], "nothing of the invented block recorded");
  stop();
  const honest = await createIntent("1.25");
  await signPayment(payer, honest.deposit_address, "1.25", "USDC", 6);
  await mainnet.test.mine({ blocks: 3 });
  t.match(await confirmed(honest.public_id), { status: "confirmed", amount_received: "1.25" }, "the real chain goes on");
  t.same((await get(invented.public_id)).transactions, [], "the invented transfer, never");
});
