// One follower per tenure (issue 46): a watcher whose lease lapsed while a read of its node hung,
// and which won the lease back after another watcher held it, reports nothing it read under the
// past tenure. Against anvil behind the JSON-RPC proxy, with the app's in-process watcher, a
// second watcher's credential over gRPC, and the core's kept blocks read from its database.
//  - The watcher reads blocks N+1..N+5 and its eth_getLogs hangs (held by the proxy).
//  - Meanwhile the node drops those blocks (evm_revert) and mines another branch; the lease
//    lapses, another watcher claims the chain (a new epoch) and lets it lapse in turn.
//  - The read comes back: the watcher wins the lease again, under yet another epoch. The blocks
//    of the hung read must never reach the core; the node's branch is followed.
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import t from "tap";
import { startDevChain } from "../../scripts/devchain/chain.ts";
import { ChainService } from "../../gen/payments/v1/chains_pb.ts";
import { until } from "../helpers/harness.ts";
import { watcherClient } from "../helpers/lifecycle.ts";
import { startRpcProxy } from "../helpers/rpc-proxy.ts";
import { metricValue } from "../helpers/reorg.ts";
import { webhookSetup } from "../helpers/webhooks.ts";

const dev = await startDevChain();
t.teardown(() => dev.stop());
const proxy = await startRpcProxy(t, dev.url);
const s = await webhookSetup(t, { env: { ETHEREUM_TEST_RPC_URL: proxy.url, ETHEREUM_CONFIRMATIONS: "3", WATCHER_POLL_MS: "100", WATCHER_LEASE_SECONDS: "5" } });
const { headers } = await watcherClient(s.app, s.rpcUrl, "test");
const chains = createClient(ChainService, createGrpcTransport({ baseUrl: s.rpcUrl }));
const db = () => s.app.db.em.fork();
const head = async () => Number(await dev.public.getBlockNumber({ cacheTime: 0 }));
const hashAt = async (n: number) => (await dev.public.getBlock({ blockNumber: BigInt(n) })).hash.toLowerCase();
const kept = async (hashes: readonly string[]) =>
  (await db().execute<{ hash: string }[]>(`select hash from chain_blocks where network = 'ethereum' and environment = 'test' and hash = any(?::text[])`, [`{${hashes.join(",")}}`])).map((r) => r.hash);
const coreTip = async () =>
  (await db().execute<{ hash: string; height: string }[]>(`select hash, height from chain_blocks where network = 'ethereum' and environment = 'test' and best order by height desc limit 1`))[0];

t.test("a read from before the lease changed hands twice reaches the core under no epoch", async (t) => {
  await dev.test.mine({ blocks: 2 });
  const base = await head();
  await until("the watcher at the node's head", async () => (await metricValue(s.app.ports.ops, "chain_processed_height", { network: "ethereum", environment: "test" })) === base, 30_000);

  // The next read hangs on its logs while the node moves on under it.
  const snapshot = await dev.test.snapshot();
  proxy.hold = (method) => method === "eth_getLogs";
  await dev.test.mine({ blocks: 5 });
  const stale = await Promise.all([1, 2, 3, 4, 5].map((i) => hashAt(base + i)));
  await until("the watcher's read of the new blocks hangs", async () => proxy.held > 0, 20_000);
  await dev.test.revert({ id: snapshot });
  await dev.test.setNextBlockTimestamp({ timestamp: BigInt(Math.floor(Date.now() / 1000) + 3600) });
  await dev.test.mine({ blocks: 6 });
  const branch = await Promise.all([1, 2, 3, 4, 5, 6].map((i) => hashAt(base + i)));
  t.notSame(branch.slice(0, 5), stale, "the node's branch is another one");

  // The lease lapses while the read hangs; another watcher takes the chain, then lets it lapse.
  const claimed = await until("another watcher claims the lapsed lease", async () => {
    const c = await chains.claimChain({ network: "ethereum", watcherId: "standby", leaseSeconds: 5 }, { headers });
    return c.active ? c : undefined;
  }, 30_000);
  const lapsed = async () =>
    (await db().execute<{ lapsed: boolean }[]>(`select lease_expires_at < now() as lapsed from chain_watchers where network = 'ethereum' and environment = 'test'`))[0]?.lapsed === true;
  await until("the standby's lease lapses", lapsed, 20_000);

  proxy.release();
  // The node's branch is followed: the core's tip becomes its head (the sentinel).
  const tip = await until("the core's tip is the node's head", async () => {
    const top = await coreTip();
    return top?.hash === branch.at(-1) ? top : undefined;
  }, 30_000);
  t.equal(Number(tip.height), base + 6, "followed to the node's head");
  const epoch = (await db().execute<{ epoch: string }[]>(`select epoch from chain_watchers where network = 'ethereum' and environment = 'test'`))[0]?.epoch;
  t.ok(Number(epoch) >= Number(claimed.epoch) + 1, `the watcher holds the chain under a later epoch than the standby's (${epoch} > ${claimed.epoch})`);
  t.same(await kept(stale), [], "no block read under the past tenure was ever kept, best or beside it");
});
