// No poison: a lying node (anvil behind a proxy of ours that rewrites one token transfer's value
// to 2^256 − 1, a 78-digit amount) makes the core refuse that output. The core keeps it with
// the reason (`ops rejected-outputs`), the watcher counts it and passes over it, and the chain
// goes on: a later payment to another merchant's intent, 25 blocks on, is counted.
import t from "tap";
import type { Hex } from "viem";
import { signPayment, startDevChain } from "../../scripts/devchain/chain.ts";
import { call, idemKey, merchantWithKey, natsUrl, until, type Credentials } from "../helpers/harness.ts";
import { runCli } from "../helpers/processes.ts";
import { startRpcProxy } from "../helpers/rpc-proxy.ts";
import { webhookSetup } from "../helpers/webhooks.ts";

const dev = await startDevChain();
t.teardown(() => dev.stop());
const node = await startRpcProxy(t, dev.url);
const s = await webhookSetup(t, { env: { ETHEREUM_TEST_RPC_URL: node.url, ETHEREUM_CONFIRMATIONS: "2", WATCHER_POLL_MS: "100" } });
const other = await merchantWithKey(s.app);
const path = (c: Credentials) => `/api/v1/merchants/${c.merchant}/payment-intents`;

async function createIntent(c: Credentials, amount: string) {
  const res = await call(s.base, "POST", path(c), { key: c.key, idempotencyKey: idemKey(), body: { network: "ethereum", asset: "USDC", requested_amount: amount } });
  if (res.status !== 200) throw new Error(`create: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data as { public_id: string; deposit_address: Hex };
}
const get = async (c: Credentials, id: string) => (await call(s.base, "GET", `${path(c)}/${id}`, { key: c.key })).body.data;
const rejectedTotal = async () =>
  Number(/^chain_observations_rejected_total\{network="ethereum",environment="test"\} (\S+)$/m.exec(await (await fetch(`http://127.0.0.1:${s.app.ports.ops}/metrics`)).text())?.[1] ?? 0);

t.test("a 78-digit amount is refused, kept with its reason, and the chain goes on", async (t) => {
  const poisoned = await createIntent(s.creds, "5");
  const { hash: lie } = await signPayment(dev, poisoned.deposit_address, "5", "USDC", 6);
  node.rewrite = (method, result) =>
    method === "eth_getLogs" && Array.isArray(result)
      ? result.map((log: { transactionHash?: string; data?: string }) => (log.transactionHash === lie ? { ...log, data: `0x${"ff".repeat(32)}` } : log))
      : result;
  // The later payment comes more than a read's 20 blocks after the lie: a watcher stuck retrying
  // the lie's step would never read it.
  await dev.test.mine({ blocks: 25 });
  const later = await createIntent(other, "3");
  await signPayment(dev, later.deposit_address, "3", "USDC", 6);
  await dev.test.mine({ blocks: 3 });

  await until("the later payment counted", async () => (await get(other, later.public_id)).status === "confirmed", 30_000);
  t.equal(await rejectedTotal(), 1, "the watcher counted one refused output");
  const p = await get(s.creds, poisoned.public_id);
  t.same([p.status, p.transactions], ["pending", []], "the refused output is not on the intent");

  const r = await runCli("services/app/ops-cli.ts", { DATABASE_URL: s.databaseUrl, NATS_URL: natsUrl }, "rejected-outputs", "--json");
  t.equal(r.code, 0, r.stderr);
  const [row] = JSON.parse(r.stdout);
  t.match(row, { network: "ethereum", environment: "test", tx_hash: lie, output_index: Number, asset: "USDC", reports: Number });
  t.match(row.to_address.toLowerCase(), poisoned.deposit_address.toLowerCase());
  t.match(row.amount, /^115792089237316195423570985008687907853269984665640564039457584007913129\.639935$/, "the amount as the node claimed it");
  t.match(row.reason, /^amount: /, "why: its amount");
  const table = await runCli("services/app/ops-cli.ts", { DATABASE_URL: s.databaseUrl, NATS_URL: natsUrl }, "rejected-outputs");
  t.match(table.stdout, /^network\s+env\s+tx\s+output/m, "a table for people");
  t.equal((await runCli("services/app/ops-cli.ts", { DATABASE_URL: s.databaseUrl }, "rejected-outputs", "--status", "failed")).code, 2, "--status is for deliveries");
});
