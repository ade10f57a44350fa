// Two Live EVM nodes must agree (issue 47): with ETHEREUM_LIVE_RPC_URL naming two nodes, a block
// counts for Live only once the second node answers the same hash for it. Both nodes are dev
// chains passing for mainnet through a proxy of ours (chain id 1, mainnet's block 0); the second
// node first relays the same chain, then another one as high or higher (a node left on another
// branch, or a provider lying), then the same chain again.
//  - agreed: a payment confirms as with one node;
//  - disagreeing: a payment on the first node's chain is not counted, not even seen, while the
//    watcher has read blocks past its confirmations (chain_unwitnessed_height names the block no
//    second node agrees with: the sentinel that the watcher did look); `ops chains` says why,
//    readiness names neither node nor the watcher's words; the watcher says it once in its log;
//  - agreeing again: the payment confirms, one payment.confirmed event.
import t from "tap";
import { signPayment, startDevChain } from "../../scripts/devchain/chain.ts";
import { mainnetGenesis } from "../../services/vocabulary/assets.ts";
import { call, idemKey, merchantWithKey, until } from "../helpers/harness.ts";
import { memoryLog, metricValue } from "../helpers/reorg.ts";
import { runCli } from "../helpers/processes.ts";
import { startRpcProxy } from "../helpers/rpc-proxy.ts";
import { notDetected, signedEvents, webhookSetup } from "../helpers/webhooks.ts";

t.setTimeout(300_000);
const mainnet = await startDevChain({ chainId: 1 });
t.teardown(() => mainnet.stop());
const elsewhere = await startDevChain({ chainId: 1 });
t.teardown(() => elsewhere.stop());
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
const labels = { network: "ethereum", environment: "live" };
const unwitnessed = () => metricValue(s.app.ports.ops, "chain_unwitnessed_height", labels);
const intents = `/api/v1/merchants/${live.merchant}/payment-intents`;

async function createIntent(): Promise<{ public_id: string; deposit_address: `0x${string}` }> {
  const res = await call(s.base, "POST", intents, { key: live.key, idempotencyKey: idemKey(), body: { network: "ethereum", asset: "ETH", requested_amount: "0.01" } });
  if (res.status !== 200) throw new Error(`create: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data;
}
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const get = async (id: string): Promise<any> => (await call(s.base, "GET", `${intents}/${id}`, { key: live.key })).body.data;
const confirmed = (id: string, ms = 45_000) => until(`${id} confirmed`, async () => ((await get(id)).status === "confirmed" ? get(id) : undefined), ms, () => id);
const eventsOf = (id: string) => {
  const byId = new Map(signedEvents(s.receiver, endpoint.secret).map((e) => [e.id, e]));
  return [...byId.values()].filter((e) => e.data.payment_intent?.public_id === id && notDetected(e)).map((e) => e.type);
};
async function chainCheck(): Promise<{ passed: boolean; message: string }> {
  const res = await call(s.base, "GET", `/api/v1/merchants/${live.merchant}/go-live/readiness`, { key: live.key });
  return res.body.data.checks.find((c: { id: string }) => c.id === "chain_watcher");
}
const head = async (chain: typeof mainnet) => Number(await chain.public.getBlockNumber({ cacheTime: 0 }));
const disagreementLines = () => log.lines().filter((l) => Number(l.level) >= 40 && /second node agrees/.test(String(l.msg)));

t.test("a block counts on Live only once a second node agrees on its hash", async (t) => {
  await mainnet.test.mine({ blocks: 1 });
  await until("the Live chain followed", async () => (await chainCheck()).passed, 30_000);

  // Agreed: counted as with one node.
  const x = await createIntent();
  await signPayment(mainnet, x.deposit_address, "0.01", "ETH", 18);
  await mainnet.test.mine({ blocks: 2 });
  t.match(await confirmed(x.public_id), { status: "confirmed", amount_received: "0.01" }, "with both nodes on one chain, a payment confirms");
  t.notOk(await unwitnessed(), "chain_unwitnessed_height is 0 while the nodes agree");

  // The second node now serves another chain, higher than the first's: every block differs.
  await elsewhere.test.mine({ blocks: (await head(mainnet)) + 10 });
  second.retarget(elsewhere.url);
  const y = await createIntent();
  const paid = await signPayment(mainnet, y.deposit_address, "0.01", "ETH", 18);
  await mainnet.test.mine({ blocks: 1 });
  const paidAt = Number((await mainnet.public.getTransactionReceipt({ hash: paid.hash })).blockNumber);
  await mainnet.test.mine({ blocks: 3 });
  // The sentinel: the watcher read past the block that would confirm the payment, and held it back.
  let held: number | undefined;
  await until("the watcher holds back a block past the payment's confirmations", async () => ((held = await unwitnessed()) ?? 0) >= paidAt + 1, 30_000, () => String(held));
  const pi = await get(y.public_id);
  t.equal(pi.status, "pending", "the payment on the first node's chain is not counted while no second node agrees");
  t.equal(Number(pi.amount_received), 0, `nor even seen: amount_received ${pi.amount_received}`);
  t.same(pi.transactions, [], "no transaction recorded");
  t.notOk(eventsOf(y.public_id).includes("payment.confirmed"), "no payment.confirmed sent");
  const chains = await until("ops chains shows why", async () => {
    const run = await runCli("services/app/ops-cli.ts", { DATABASE_URL: s.databaseUrl }, "chains");
    return /second node agrees/.test(run.stdout) ? run.stdout : undefined;
  }, 30_000);
  t.match(chains, /ethereum[^\n]*live|live[^\n]*ethereum/, `ops chains, the operator's view, says why the Live chain is not counted: ${chains}`);
  const check = await chainCheck();
  t.notOk(check.message.includes(String(node.port)) || check.message.includes(String(second.port)) || /second node/.test(check.message), `readiness never names a node, nor the watcher's words: ${check.message}`);
  t.equal(disagreementLines().length, 1, `the watcher says so once in its log: ${JSON.stringify(disagreementLines())}`);

  // The second node is back on the first's chain: the payment counts, once.
  second.retarget(mainnet.url);
  t.match(await confirmed(y.public_id), { status: "confirmed", amount_received: "0.01" }, "confirmed once both nodes agree");
  await until("payment.confirmed delivered", async () => eventsOf(y.public_id).includes("payment.confirmed"), 30_000, () => JSON.stringify(eventsOf(y.public_id)));
  t.equal(eventsOf(y.public_id).filter((e) => e === "payment.confirmed").length, 1, "one payment.confirmed event");
  await until("chain_unwitnessed_height back to 0", async () => !(await unwitnessed()), 10_000);
  t.ok((await chainCheck()).passed, "readiness passes");
});
