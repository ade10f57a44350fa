// A counted EVM transfer is told by a second node (issue 60). Two Live-like nodes (anvil with
// chain id 1 and mainnet's block 0 through our proxies, the Live USDC contract's address holding
// the test token) behind ETHEREUM_LIVE_RPC_URL=liar,honest. The read node lies consistently: a
// USDC Transfer to a deposit address that never happened, in its eth_getLogs (by range and by
// block hash), its receipt and transaction, and its block's logs bloom, in a real block (hash
// real, so the batch's top agrees with the witness), or in an invented block below a real top (its
// parent links rewritten). Neither is ever counted: the watcher names the transfer no second node
// confirms in its log, in chain_unwitnessed_height and in `ops chains`, and once the node tells
// the truth again the chain goes on and an honest USDC payment confirms.
import t from "tap";
import { encodeFunctionData, pad, parseUnits, toHex, type Hex } from "viem";
import { signPayment, startDevChain, testTokenCode, tokenAbi } from "../../scripts/devchain/chain.ts";
import { findAsset, mainnetGenesis } from "../../services/vocabulary/assets.ts";
import { bloomOf } from "../../services/watcher/evm-bloom.ts";
import { transferTopic } from "../../services/watcher/evm-told.ts";
import { call, idemKey, merchantWithKey, until } from "../helpers/harness.ts";
import { runCli } from "../helpers/processes.ts";
import { memoryLog, metricValue } from "../helpers/reorg.ts";
import { startRpcProxy } from "../helpers/rpc-proxy.ts";
import { signedEvents, webhookSetup } from "../helpers/webhooks.ts";

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
const eventsOf = (id: string) => [...new Map(signedEvents(s.receiver, endpoint.secret).map((e) => [e.id, e])).values()].filter((e) => e.data.payment_intent?.public_id === id).map((e) => e.type);
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

/**
 * Makes the read node tell of a USDC transfer of `amount` to `to` by transaction `txHash`, in the
 * block at `height` as `blockOf` says it is (its hash and the rest of it, once the block is
 * mined), consistently: logs by range and by hash, receipt, transaction and bloom. `blockOf`
 * rewrites a real block the node answers (by number or hash); it also names the block the log is
 * in.
 */
function lie(o: { height: number; to: Hex; amount: bigint; txHash: Hex; blockOf: (real: Json) => Json }) {
  const fake = (block: Json) => ({
    address: usdc,
    topics: [transferTopic, pad(mainnet.payer.address), pad(o.to)],
    data: pad(toHex(o.amount)),
    blockNumber: toHex(o.height),
    blockHash: block.hash as string,
    transactionHash: o.txHash,
    transactionIndex: "0x0",
    logIndex: "0x0",
    removed: false,
  });
  const liedBlock = async (ask: (m: string, p: unknown[]) => Promise<unknown>) => {
    const real = (await ask("eth_getBlockByNumber", [toHex(o.height), false])) as Json | null;
    if (!real) return undefined;
    const told = o.blockOf(real);
    const l = fake(told);
    return { ...told, hash: String(told.hash), logsBloom: bloomWith(String(told.logsBloom), [l]), log: l };
  };
  node.intercept = async (method, params, ask) => {
    if (method === "eth_getBlockByNumber" || method === "eth_getBlockByHash") {
      const lied = await liedBlock(ask);
      if (!lied) return undefined;
      const { log: _, ...block } = lied;
      const isIt = method === "eth_getBlockByNumber" ? params[0] === toHex(o.height) : params[0] === block.hash;
      if (isIt) return params[1] === true ? { ...(await ask("eth_getBlockByNumber", [toHex(o.height), true]) as Json), ...block, transactions: [] } : block;
      // The block above names the told one as its parent.
      if (method === "eth_getBlockByNumber" && params[0] === toHex(o.height + 1)) {
        const above = (await ask(method, params)) as Json | null;
        return above ? { ...above, parentHash: block.hash } : undefined;
      }
      return undefined;
    }
    if (method === "eth_getLogs") {
      const filter = params[0] as Json;
      const lied = await liedBlock(ask);
      if (!lied) return undefined;
      const covers = filter.blockHash !== undefined ? filter.blockHash === lied.hash : Number(filter.fromBlock) <= o.height && o.height <= Number(filter.toBlock);
      if (!covers) return undefined;
      const real = ((await ask(method, params)) as Json[]).filter((l) => Number(l.blockNumber) !== o.height);
      return [...real, lied.log].sort((a, b) => Number(a.blockNumber) - Number(b.blockNumber));
    }
    if ((method === "eth_getTransactionReceipt" || method === "eth_getTransactionByHash") && String(params[0]).toLowerCase() === o.txHash) {
      const lied = await liedBlock(ask);
      if (!lied) return null;
      const where = { blockHash: lied.hash, blockNumber: toHex(o.height), transactionHash: o.txHash, transactionIndex: "0x0" };
      if (method === "eth_getTransactionByHash") return { ...template.tx, ...where, hash: o.txHash, to: usdc, value: "0x0" };
      return { ...template.receipt, ...where, status: "0x1", to: usdc, logs: [lied.log], logsBloom: bloomWith(`0x${"00".repeat(256)}`, [lied.log]) };
    }
    return undefined;
  };
  return () => (node.intercept = undefined);
}

await until("the Live chain followed", async () => {
  await mainnet.test.mine({ blocks: 1 });
  return /ethereum[^\n]*live[^\n]*yes|live[^\n]*ethereum/.test(await opsChains()) && (await metricValue(s.app.ports.ops, "chain_watcher_active", { network: "ethereum", environment: "live" })) === 1;
}, 60_000);

t.test("a transfer the read node tells of in a real block, which no second node has, is never counted; an honest payment afterwards confirms", async (t) => {
  const invented = await createIntent("5000");
  const height = (await head()) + 1;
  const txHash = `0x${"5e".repeat(32)}` as Hex;
  const stop = lie({ height, to: invented.deposit_address, amount: parseUnits("5000", 6), txHash, blockOf: (real) => real });
  await mainnet.test.mine({ blocks: 4 });
  let held: number | undefined;
  await until("the watcher holds back the block of the transfer no witness tells", async () => ((held = await unwitnessed()) ?? 0) === height, 30_000, () => String(held));
  const pi = await get(invented.public_id);
  t.same([pi.status, Number(pi.amount_received ?? 0), pi.transactions], ["pending", 0, []], "nothing of the invented transfer recorded");
  t.match(await until("ops chains names it", async () => ((await opsChains()).includes(txHash) ? opsChains() : undefined), 30_000), new RegExp(`no second node confirms the transfer ${txHash}:1 of 5000 USDC`));
  t.equal(confirmLines().length, 1, "said once in the log");
  t.match(confirmLines()[0], { height, transfer: `${txHash}:1`, witnesses: ["it has no such mined transaction"] });

  stop();
  const honest = await createIntent("12.5");
  await signPayment(payer, honest.deposit_address, "12.5", "USDC", 6);
  await mainnet.test.mine({ blocks: 3 });
  t.match(await confirmed(honest.public_id), { status: "confirmed", amount_received: "12.5" }, "the chain goes on once the node tells the truth: an honest USDC payment, confirmed by the witness, counts");
  await until("chain_unwitnessed_height back to 0", async () => !(await unwitnessed()), 10_000);
  const after = await get(invented.public_id);
  t.same([after.status, after.transactions], ["pending", []], "the invented transfer, never");
  t.same(eventsOf(invented.public_id), ["payment.intent.created"], "no payment event for it");
});

t.test("a transfer in an invented block below a real top (the parent links rewritten) is refused", async (t) => {
  const invented = await createIntent("7000");
  const height = (await head()) + 1;
  const txHash = `0x${"7a".repeat(32)}` as Hex;
  const madeUp = `0x${"1b".repeat(32)}`;
  const stop = lie({ height, to: invented.deposit_address, amount: parseUnits("7000", 6), txHash, blockOf: (real) => ({ ...real, hash: madeUp, transactions: [] }) });
  // Both blocks at once: the invented one and the real one above it are read in one batch, whose top the witness agrees with.
  await mainnet.test.mine({ blocks: 2 });
  let held: number | undefined;
  await until("the watcher holds back the invented block's transfer", async () => ((held = await unwitnessed()) ?? 0) === height, 30_000, () => String(held));
  t.same((await get(invented.public_id)).transactions, [], "nothing recorded");
  t.match(confirmLines().at(-1), { height, hash: madeUp, transfer: `${txHash}:1` }, "the log names the invented block and the transfer");
  stop();
  const honest = await createIntent("1.25");
  await signPayment(payer, honest.deposit_address, "1.25", "USDC", 6);
  await mainnet.test.mine({ blocks: 3 });
  t.match(await confirmed(honest.public_id), { status: "confirmed", amount_received: "1.25" }, "the real chain goes on");
  t.same((await get(invented.public_id)).transactions, [], "the invented transfer, never");
});
