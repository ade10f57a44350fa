// A dead node shows: a Live watcher's node (a dev chain passing for mainnet through a proxy of
// ours) stops answering for three minutes. chain_lag_seconds keeps growing past 150 while
// nothing is processed (the node still asked every quarter second), and go-live readiness reports the chain as not followed, never naming the
// node (its host is the operator's: ops chains shows it); once the node is back, both recover.
import t from "tap";
import { startDevChain } from "../../scripts/devchain/chain.ts";
import { mainnetGenesis } from "../../services/vocabulary/assets.ts";
import { call, merchantWithKey, until } from "../helpers/harness.ts";
import { startRpcProxy } from "../helpers/rpc-proxy.ts";
import { webhookSetup } from "../helpers/webhooks.ts";

t.setTimeout(400_000);
const mainnet = await startDevChain({ chainId: 1 });
t.teardown(() => mainnet.stop());
const node = await startRpcProxy(t, mainnet.url);
node.genesisHash = mainnetGenesis.ethereum;
const s = await webhookSetup(t, { env: { OPERATOR_WATCHED_NETWORKS: "", ETHEREUM_LIVE_RPC_URL: node.url, WATCHER_POLL_MS: "200" } });
const live = await merchantWithKey(s.app, "live");
const metrics = async () => (await fetch(`http://127.0.0.1:${s.app.ports.ops}/metrics`)).text();
const lagSeconds = async () => Number(/^chain_lag_seconds\{network="ethereum",environment="live"\} (\S+)$/m.exec(await metrics())?.[1]);
const rpcErrors = async () => Number(/^chain_rpc_errors_total\{network="ethereum",environment="live"\} (\S+)$/m.exec(await metrics())?.[1] ?? 0);
async function chainCheck(): Promise<{ passed: boolean; message: string }> {
  const res = await call(s.base, "GET", `/api/v1/merchants/${live.merchant}/go-live/readiness`, { key: live.key });
  return res.body.data.checks.find((c: { id: string }) => c.id === "chain_watcher");
}

t.test("three minutes without an answer: lag above 150 s, readiness names the chain, not the node; then both recover", { timeout: 330_000 }, async (t) => {
  await mainnet.test.mine({ blocks: 1 });
  await until("the Live chain followed", async () => (await chainCheck()).passed, 30_000);
  await until("a block processed", async () => (await lagSeconds()) >= 0, 30_000);

  await node.down();
  const down = await until("readiness: not followed", async () => {
    const c = await chainCheck();
    return c.passed ? undefined : c;
  }, 200_000);
  t.match(down.message, "No watcher has followed the Live chain of ethereum");
  t.match(down.message, "A watcher of ethereum runs but does not follow the chain");
  t.notMatch(down.message, `127.0.0.1:${node.port}`, "never the node's host");
  t.notMatch(down.message, "does not answer", "nor the watcher's words");
  const lag = await until("lag above 150 s", async () => {
    const v = await lagSeconds();
    return v > 150 ? v : undefined;
  }, 60_000);
  t.ok(lag > 150, `chain_lag_seconds ${lag.toFixed(0)} while the node is down`);
  // Minutes into the outage the node is still asked every quarter second (a backoff doubling to
  // 30 s would ask it once in 30 s), so the watcher is back within a quarter second of its return.
  const errorsBefore = await rpcErrors();
  await until("the node asked again five times within 15 s, minutes into the outage", async () => (await rpcErrors()) >= errorsBefore + 5, 15_000);

  await node.up();
  await mainnet.test.mine({ blocks: 1 });
  await until("followed again", async () => (await chainCheck()).passed, 60_000);
  await until("lag back to seconds", async () => (await lagSeconds()) < 60, 30_000);
});
