// The watcher as its own process (`main.ts watcher`, reaching the core over gRPC with an internal
// credential) against anvil: SIGKILLed while catching up and restarted, it misses nothing and
// counts nothing twice; two of them follow the chain one at a time and the second takes over when
// the first is killed; a node that goes away and comes back is followed again.
import t from "tap";
import type { Hex } from "viem";
import { signPayment, startDevChain } from "../../scripts/devchain/chain.ts";
import { createInternalCredential } from "../../services/auth/admin.ts";
import { call, idemKey, startTestApp, until } from "../helpers/harness.ts";
import { merchantWithKey } from "../helpers/harness.ts";
import { startTcpProxy } from "../helpers/tcp-proxy.ts";
import { spawnWatcher } from "../helpers/watcher-process.ts";

const dev = await startDevChain();
t.teardown(() => dev.stop());
// The core decides what counts: 2 confirmations here.
const core = await startTestApp(t, { ETHEREUM_CONFIRMATIONS: "2" }, ["rpc", "gateway", "worker", "scheduler"]);
const a = await merchantWithKey(core.app);
const { credential } = await createInternalCredential(core.app.db.em.fork(), "watcher processes", ["observe"], "test", { networks: ["ethereum", "polygon"] });

const startWatcher = (nodeUrl: string) => spawnWatcher(t, { RPC_URL: core.rpcUrl, WATCHER_CREDENTIAL_TEST: credential, ETHEREUM_TEST_RPC_URL: nodeUrl });

const intents = `/api/v1/merchants/${a.merchant}/payment-intents`;
async function createIntent(amount: string) {
  const res = await call(core.base, "POST", intents, { key: a.key, idempotencyKey: idemKey(), body: { network: "ethereum", asset: "USDC", requested_amount: amount } });
  if (res.status !== 200) throw new Error(`create: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data as { public_id: string; deposit_address: Hex };
}
const get = async (id: string) => (await call(core.base, "GET", `${intents}/${id}`, { key: a.key })).body.data;
const holder = async () =>
  (await core.app.db.em.fork().execute<{ holder: string; height: string }[]>(`select holder, height from chain_watchers where network = 'ethereum' and environment = 'test'`))[0];
const recorded = async () => Number((await core.app.db.em.fork().execute<{ n: string }[]>(`select count(*) as n from chain_observations`))[0]?.n);
const confirmedAll = (ids: string[]) =>
  until(`${ids.length} intents confirmed`, async () => {
    for (const id of ids) if ((await get(id)).status !== "confirmed") return undefined;
    return true;
  }, 60_000);

t.test("SIGKILLed while catching up, restarted: nothing missed, nothing counted twice", async (t) => {
  const first = startWatcher(dev.url);
  await until("the watcher holds the lease and saved a position", async () => (await holder())?.height != null, 20_000, first.output);
  first.child.kill("SIGKILL");
  await first.exited;
  // A backlog while no watcher runs: 30 payments, one block each.
  const ids: string[] = [];
  for (let i = 0; i < 30; i++) {
    const pi = await createIntent("1.5");
    ids.push(pi.public_id);
    await signPayment(dev, pi.deposit_address, "1.5", "USDC", 6);
    await dev.test.mine({ blocks: 1 });
  }
  await dev.test.mine({ blocks: 2 });
  const second = startWatcher(dev.url);
  // Killed as soon as it has reported something of the backlog (its lease then runs out before a third takes over).
  await until("the second watcher reports", async () => (await recorded()) > 0, 30_000, second.output);
  second.child.kill("SIGKILL");
  await second.exited;
  const third = startWatcher(dev.url);
  await confirmedAll(ids);
  for (const id of ids) {
    const pi = await get(id);
    t.equal(pi.amount_received, "1.5", `${id}: counted once`);
    t.equal(pi.transactions.length, 1, `${id}: one output`);
  }
  // Everything may have been counted before the third even started: stop it once it has.
  await until("the third watcher started", async () => /"msg":"started"/.test(third.output()), 20_000, third.output);
  third.child.kill("SIGTERM");
  t.equal(await third.exited, 0, "SIGTERM: a clean exit");
  t.match(third.output(), /chain watcher stopped/);
});

t.test("two watchers: one follows the chain, the other takes over when it is killed", async (t) => {
  const w1 = startWatcher(dev.url);
  const w2 = startWatcher(dev.url);
  const byPid = new Map([
    [w1.child.pid, w1],
    [w2.child.pid, w2],
  ]);
  const pidOf = (h: string | undefined) => Number(/-(\d+)-[0-9a-f]+$/.exec(h ?? "")?.[1]);
  // The lease may still be the previous test's third watcher's until it lapses.
  const active = await until("one of the two holds the lease", async () => byPid.get(pidOf((await holder())?.holder)), 30_000);
  const pi = await createIntent("2");
  await signPayment(dev, pi.deposit_address, "2", "USDC", 6);
  await dev.test.mine({ blocks: 2 });
  await confirmedAll([pi.public_id]);
  const standby = active === w1 ? w2 : w1;
  // It says so at its first claim refused, which a loaded machine may not have reached yet.
  await until("the other watcher says it stands by", async () => /another watcher follows the chain; standing by/.test(standby.output()), 30_000, () => standby.output());
  t.pass("the other stands by");
  active.child.kill("SIGKILL");
  await active.exited;
  const next = await createIntent("3");
  await signPayment(dev, next.deposit_address, "3", "USDC", 6);
  await dev.test.mine({ blocks: 2 });
  await confirmedAll([next.public_id]);
  t.equal(pidOf((await holder())?.holder), standby.child.pid, "the standby took the lease");
  t.match(standby.output(), /following the chain/);
  standby.child.kill("SIGTERM");
  await standby.exited;
});

t.test("the node goes away and comes back: logged once, then followed again", async (t) => {
  const proxy = await startTcpProxy(t, dev.port);
  const w = startWatcher(`http://127.0.0.1:${proxy.port}`);
  await until("following", async () => /following the chain/.test(w.output()), 30_000, w.output);
  t.match(w.output(), `chain        ethereum (test) followed at http://127.0.0.1:${proxy.port}, for the core at ${core.rpcUrl}`, "the banner names the chain and the node");
  proxy.blackhole();
  const pi = await createIntent("4");
  await signPayment(dev, pi.deposit_address, "4", "USDC", 6);
  await dev.test.mine({ blocks: 2 });
  await until("the outage logged", async () => /cannot go on; retrying with backoff/.test(w.output()), 60_000, w.output);
  proxy.retarget(dev.port);
  await confirmedAll([pi.public_id]);
  await until("the recovery logged", async () => /chain watcher resumed/.test(w.output()), 30_000, w.output);
  t.equal(w.output().match(/cannot go on; retrying with backoff/g)?.length, 1, "the outage is logged once, not once per retry");
  t.match(w.output(), `"node":"http://127.0.0.1:${proxy.port}"`, "the node is named by scheme, host and port only");
  w.child.kill("SIGTERM");
  t.equal(await w.exited, 0);
});

t.test("SIGTERM while the watcher is still starting (its node silent): a clean stop once the start is over, not a kill mid-start", async (t) => {
  const proxy = await startTcpProxy(t, dev.port);
  proxy.blackhole();
  const w = startWatcher(`http://127.0.0.1:${proxy.port}`);
  // The start asks the node which chain it serves and waits up to 5 s for an answer that never comes.
  await until("the start asks the node", async () => proxy.connections > 0, 10_000, w.output);
  t.notMatch(w.output(), /"msg":"started"/, "still starting");
  w.child.kill("SIGTERM");
  t.equal(await w.exited, 0, "exits 0");
  t.match(w.output(), /"signal":"SIGTERM"[^\n]*"msg":"shutting down"/, "it stopped as after any start");
});
