// The EVM watcher never trusts its node: anvil behind a JSON-RPC proxy of our own that misbehaves
// as real nodes do. A Live node that was down at start and then answers as a testnet is never
// followed (readiness names the network, never the node: the operator's ops chains shows the node and why); a node that changes chains or starts syncing while followed
// stops being followed until it proves itself again; a node a few blocks behind un-counts
// nothing. Everything is checked through the REST API, /metrics and the signed webhooks.
import t from "tap";
import type { Hex } from "viem";
import { signPayment, startDevChain } from "../../scripts/devchain/chain.ts";
import { call, idemKey, merchantWithKey, until, type Credentials } from "../helpers/harness.ts";
import { runCli } from "../helpers/processes.ts";
import { startRpcProxy } from "../helpers/rpc-proxy.ts";
import { eventsOnce, notDetected, webhookSetup } from "../helpers/webhooks.ts";

const dev = await startDevChain();
t.teardown(() => dev.stop());
const testNode = await startRpcProxy(t, dev.url);
// The Live node's port refuses connections when the server starts.
const liveNode = await startRpcProxy(t, dev.url);
await liveNode.down();
const s = await webhookSetup(t, {
  env: {
    // Readiness here reads only what the built-in watchers follow (the harness names every network otherwise).
    OPERATOR_WATCHED_NETWORKS: "",
    ETHEREUM_TEST_RPC_URL: testNode.url,
    ETHEREUM_LIVE_RPC_URL: liveNode.url,
    ETHEREUM_CONFIRMATIONS: "2",
    WATCHER_POLL_MS: "100",
    WATCHER_NODE_PROOF_SECONDS: "1",
  },
});
const { base, creds: a } = s;
const endpoint = await s.createEndpoint();
const path = (c: Credentials) => `/api/v1/merchants/${c.merchant}/payment-intents`;

async function createIntent(body: Record<string, unknown>, c: Credentials = a) {
  const res = await call(base, "POST", path(c), { key: c.key, idempotencyKey: idemKey(), body: { network: "ethereum", ...body } });
  if (res.status !== 200) throw new Error(`create: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data as { public_id: string; deposit_address: Hex; asset: string };
}
const get = async (id: string, c: Credentials = a) => (await call(base, "GET", `${path(c)}/${id}`, { key: c.key })).body.data;
const pay = (pi: { deposit_address: Hex; asset: string }, amount: string) => signPayment(dev, pi.deposit_address, amount, pi.asset, pi.asset === "ETH" ? 18 : 6);
const mine = (blocks = 1) => dev.test.mine({ blocks });
const metrics = async () => (await fetch(`http://127.0.0.1:${s.app.ports.ops}/metrics`)).text();
const gauge = async (name: string, environment: string) => {
  const m = new RegExp(`^${name}\\{network="ethereum",environment="${environment}"\\} (\\S+)$`, "m").exec(await metrics());
  return m ? Number(m[1]) : undefined;
};
const statusIs = (id: string, status: string, c: Credentials = a) =>
  until(`${id} ${status}`, async () => ((await get(id, c)).status === status ? true : undefined), 30_000, () => status);
const eventsOf = (id: string) => eventsOnce(s.receiver, endpoint.secret).filter((e) => e.data.payment_intent?.public_id === id && notDetected(e)).map((e) => e.type);

await until("the Test chain followed", async () => (await gauge("chain_watcher_active", "test")) === 1, 30_000);

t.test("a Live node down at start that comes up as a testnet is never followed; readiness names the network, the operator sees the node", async (t) => {
  const live = await merchantWithKey(s.app, "live", undefined, a.merchant);
  await liveNode.up();
  await until("the Live watcher reached its node", async () => [...liveNode.calls.values()].some((n) => n > 0), 60_000);
  const livePi = await createIntent({ asset: "ETH", requested_amount: "0.5" }, live);
  const sentinel = await createIntent({ asset: "ETH", requested_amount: "0.5" });
  await pay(livePi, "0.5");
  await pay(sentinel, "0.5");
  await mine(3);
  const callsBefore = [...liveNode.calls.values()].reduce((x, y) => x + y, 0);
  await statusIs(sentinel.public_id, "confirmed");
  // The Live watcher talked to its node again after the payment's blocks were mined.
  await until("the Live watcher asked again", async () => [...liveNode.calls.values()].reduce((x, y) => x + y, 0) > callsBefore + 1, 60_000);
  t.equal(await gauge("chain_node_refused", "live"), 1);
  const l = await get(livePi.public_id, live);
  t.same([l.status, l.transactions], ["pending", []], "a testnet's payment never counts for a Live intent");
  t.equal(await gauge("chain_processed_height", "live"), undefined, "no Live block was ever processed");
  const res = await call(base, "GET", `/api/v1/merchants/${live.merchant}/go-live/readiness`, { key: live.key });
  const check = res.body.data.checks.find((c: { id: string }) => c.id === "chain_watcher");
  t.equal(check.passed, false, "readiness: the Live chain is not followed");
  t.match(check.message, "No watcher has followed the Live chain of ethereum", "readiness names the network not followed");
  t.match(check.message, "A watcher of ethereum runs but does not follow the chain: the operator sees why (npm run -s ops -- chains");
  const merchantSees = JSON.stringify(res.body);
  for (const secret of [`127.0.0.1:${liveNode.port}`, "11155111", "chain id", "the node follows"]) {
    t.notOk(merchantSees.includes(secret), `the merchant's readiness says nothing of the node: not "${secret}"`);
  }
  // The operator's view: the node by scheme, host and port, and why it is not followed.
  const ops = await runCli("services/app/ops-cli.ts", { DATABASE_URL: s.databaseUrl, NATS_URL: s.config.natsUrl ?? "nats://127.0.0.1:4222", JETSTREAM_PREFIX: s.prefix }, "chains", "--json");
  t.equal(ops.code, 0, `ops chains exits 0: ${ops.stderr}`);
  const liveChain = (JSON.parse(ops.stdout) as { network: string; environment: string; nodes: { node: string; problem: string | null }[] }[]).find((c) => c.network === "ethereum" && c.environment === "live");
  t.equal(liveChain?.nodes[0]?.node, `http://127.0.0.1:${liveNode.port}`, "ops chains names the node");
  t.match(liveChain?.nodes[0]?.problem, "the node follows chain id 11155111, not ethereum mainnet", "and why it is not followed");
  const table = await runCli("services/app/ops-cli.ts", { DATABASE_URL: s.databaseUrl, NATS_URL: s.config.natsUrl ?? "nats://127.0.0.1:4222", JETSTREAM_PREFIX: s.prefix }, "chains");
  t.match(table.stdout, new RegExp(`ethereum\\s+live .*http://127\\.0\\.0\\.1:${liveNode.port}: the node follows chain id 11155111`), "its table too");
});

t.test("a node that changes chains or starts syncing while followed is not followed until it proves itself again", async (t) => {
  for (const [what, misbehave, behave] of [
    ["answers for mainnet's chain id", () => (testNode.chainId = 1), () => (testNode.chainId = undefined)],
    ["answers for another testnet's chain id", () => (testNode.chainId = 17000), () => (testNode.chainId = undefined)],
    ["says it is syncing", () => (testNode.syncing = true), () => (testNode.syncing = false)],
  ] as const) {
    misbehave();
    await until(`refused once it ${what}`, async () => (await gauge("chain_node_refused", "test")) === 1, 30_000);
    t.equal(await gauge("chain_watcher_active", "test"), 0, `${what}: not followed`);
    const pi = await createIntent({ asset: "USDC", requested_amount: "3" });
    const { hash } = await pay(pi, "3");
    await mine(2);
    const blockRequests = testNode.calls.get("eth_getLogs") ?? 0;
    // The refused watcher keeps asking who the node is, and reads nothing else.
    const proofs = testNode.calls.get("eth_chainId") ?? 0;
    await until("asked again", async () => (testNode.calls.get("eth_chainId") ?? 0) >= proofs + 2, 30_000);
    t.equal(testNode.calls.get("eth_getLogs") ?? 0, blockRequests, `${what}: no block read from it`);
    t.same((await get(pi.public_id)).transactions, [], `${what}: nothing recorded`);
    behave();
    await statusIs(pi.public_id, "confirmed");
    t.equal(await gauge("chain_node_refused", "test"), 0, `${what}: followed again once it proved itself`);
    t.equal((await get(pi.public_id)).transactions[0].tx_hash, hash);
  }
});

t.test("a node 3 blocks behind for a while un-counts nothing", async (t) => {
  const pi = await createIntent({ asset: "USDC", requested_amount: "12.5" });
  await pay(pi, "12.5");
  await mine(2);
  await statusIs(pi.public_id, "confirmed");
  await mine(1);
  const head = Number(await dev.public.getBlockNumber());
  await until("the head processed", async () => (await gauge("chain_processed_height", "test")) === head, 30_000);
  testNode.behind = 3;
  // A while: the watcher asks the behind node for its head twenty times.
  const polls = testNode.calls.get("eth_blockNumber") ?? 0;
  await until("twenty polls of the behind node", async () => (testNode.calls.get("eth_blockNumber") ?? 0) >= polls + 20, 30_000);
  t.equal(await gauge("chain_node_behind_blocks", "test"), 3, "the metric says how far behind");
  testNode.behind = 0;
  const sentinel = await createIntent({ asset: "USDC", requested_amount: "1" });
  await pay(sentinel, "1");
  await mine(2);
  await statusIs(sentinel.public_id, "confirmed");
  await until("the sentinel's webhook", async () => eventsOf(sentinel.public_id).includes("payment.confirmed"), 30_000);
  const now = await get(pi.public_id);
  t.equal(now.status, "confirmed", "still confirmed");
  t.equal(now.transactions.length, 1);
  t.equal(now.transactions[0].counted, true, "still counted");
  t.same(eventsOf(pi.public_id).sort(), ["payment.confirmed", "payment.intent.created"], "no payment.reorged: nothing was reorganised");
  t.equal(await gauge("chain_node_behind_blocks", "test"), 0);
});
