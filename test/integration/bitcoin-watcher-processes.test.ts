// The Bitcoin watcher as its own process (`main.ts watcher`, over gRPC with an internal
// credential) against a bcoin regtest node: SIGKILLed while catching up on a backlog of blocks
// and restarted, it misses nothing and counts nothing twice; a node that goes away and comes
// back is logged once and followed again; a Live URL on a regtest node stops the start, and so
// do a Live credential given as WATCHER_CREDENTIAL_TEST and a Live URL over plain http to another host.
import t from "tap";
import { createInternalCredential } from "../../services/auth/admin.ts";
import { startRegtest } from "../helpers/bitcoin-regtest.ts";
import { call, idemKey, merchantWithKey, startTestApp, until } from "../helpers/harness.ts";
import { startTcpProxy } from "../helpers/tcp-proxy.ts";
import { spawnWatcher } from "../helpers/watcher-process.ts";

const chain = await startRegtest();
t.teardown(() => chain.stop());
const core = await startTestApp(t, {}, ["rpc", "gateway", "worker", "scheduler"]);
const a = await merchantWithKey(core.app);
const { credential } = await createInternalCredential(core.app.db.em.fork(), "bitcoin watcher processes", ["observe"], "test", { networks: ["bitcoin"] });
const startWatcher = (nodeUrl: string, env: Record<string, string> = {}) =>
  spawnWatcher(t, { RPC_URL: core.rpcUrl, WATCHER_CREDENTIAL_TEST: credential, BITCOIN_TEST_RPC_URL: nodeUrl, ...env });

const intents = `/api/v1/merchants/${a.merchant}/payment-intents`;
async function createIntent(amount: string) {
  const res = await call(core.base, "POST", intents, { key: a.key, idempotencyKey: idemKey(), body: { network: "bitcoin", asset: "BTC", requested_amount: amount } });
  if (res.status !== 200) throw new Error(`create: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data as { public_id: string; deposit_address: string };
}
const get = async (id: string) => (await call(core.base, "GET", `${intents}/${id}`, { key: a.key })).body.data;
const position = async () =>
  (await core.app.db.em.fork().execute<{ height: string | null }[]>(`select height from chain_watchers where network = 'bitcoin' and environment = 'test'`))[0]?.height;
const recorded = async () => Number((await core.app.db.em.fork().execute<{ n: string }[]>(`select count(*) as n from chain_observations where network = 'bitcoin'`))[0]?.n);
const confirmedAll = (ids: string[]) =>
  until(`${ids.length} intents confirmed`, async () => {
    for (const id of ids) if ((await get(id)).status !== "confirmed") return undefined;
    return true;
  }, 60_000);

t.test("SIGKILLed while catching up, restarted: nothing missed, nothing counted twice", async (t) => {
  const first = startWatcher(chain.url);
  await until("the watcher saved a position", async () => (await position()) != null, 20_000, first.output);
  first.child.kill("SIGKILL");
  await first.exited;
  // A backlog while no watcher runs: 30 payments of two outputs each, one block each.
  const ids: string[] = [];
  for (let i = 0; i < 30; i++) {
    const pi = await createIntent("0.015");
    ids.push(pi.public_id);
    await chain.pay([{ address: pi.deposit_address, btc: "0.01" }, { address: pi.deposit_address, btc: "0.005" }]);
    await chain.mine();
  }
  await chain.mine(2);
  const second = startWatcher(chain.url);
  await until("the second watcher reports", async () => (await recorded()) > 0, 30_000, second.output);
  second.child.kill("SIGKILL");
  await second.exited;
  const third = startWatcher(chain.url);
  await confirmedAll(ids);
  for (const id of ids) {
    const pi = await get(id);
    t.equal(pi.amount_received, "0.015", `${id}: counted once`);
    t.equal(pi.transactions.length, 2, `${id}: its two outputs, once each`);
  }
  third.child.kill("SIGTERM");
  t.equal(await third.exited, 0, "SIGTERM: a clean exit");
  t.match(third.output(), /chain watcher stopped/);
});

t.test("the node goes away and comes back: logged once, then followed again", async (t) => {
  const proxy = await startTcpProxy(t, chain.port);
  const w = startWatcher(chain.url.replace(`:${chain.port}/`, `:${proxy.port}/`));
  await until("following", async () => /following the chain/.test(w.output()), 30_000, w.output);
  t.match(w.output(), `chain        bitcoin (test) followed at http://127.0.0.1:${proxy.port}, for the core at ${core.rpcUrl}`, "the banner names the chain and the node");
  proxy.blackhole();
  const pi = await createIntent("0.4");
  await chain.pay([{ address: pi.deposit_address, btc: "0.4" }]);
  await chain.mine(2);
  await until("the outage logged", async () => /cannot go on; retrying with backoff/.test(w.output()), 90_000, w.output);
  proxy.retarget(chain.port);
  await confirmedAll([pi.public_id]);
  await until("the recovery logged", async () => /chain watcher resumed/.test(w.output()), 30_000, w.output);
  t.equal(w.output().match(/cannot go on; retrying with backoff/g)?.length, 1, "the outage is logged once, not once per retry");
  t.notMatch(w.output(), /regtest-password/, "the node's password is in no log line");
  w.child.kill("SIGTERM");
  t.equal(await w.exited, 0);
});

t.test("a Live URL on a node that is not mainnet: the start stops with one line", async (t) => {
  const { credential: live } = await createInternalCredential(core.app.db.em.fork(), "live watcher", ["observe"], "live", { networks: ["bitcoin"] });
  const w = spawnWatcher(t, { RPC_URL: core.rpcUrl, WATCHER_CREDENTIAL_LIVE: live, BITCOIN_LIVE_RPC_URL: chain.url });
  t.not(await w.exited, 0);
  t.match(w.output(), "BITCOIN_LIVE_RPC_URL: the node follows bitcoin's regtest chain, not bitcoin mainnet: Live payments are only watched on mainnet");
});

t.test("a Live credential given as WATCHER_CREDENTIAL_TEST: the start stops with one line, having followed nothing", async (t) => {
  const { credential: live } = await createInternalCredential(core.app.db.em.fork(), "live watcher in a test slot", ["observe"], "live");
  const before = await core.app.db.em.fork().execute(`select network, environment, epoch from chain_watchers order by network, environment`);
  const w = startWatcher(chain.url, { WATCHER_CREDENTIAL_TEST: live });
  t.equal(await w.exited, 1, "exits 1");
  const lines = w.output().trim().split("\n").filter((l) => l.startsWith("payments: "));
  t.same(lines, [
    "payments: WATCHER_CREDENTIAL_TEST is a credential of Live, not Test: a Test watcher reports with a credential of its own environment (npm run -s admin -- internal-credential create --name watcher --roles observe --environment test --networks bitcoin)",
  ], "one line saying why");
  t.notMatch(w.output(), /"msg":"started"/, "it never started");
  t.same(await core.app.db.em.fork().execute(`select network, environment, epoch from chain_watchers order by network, environment`), before, "nothing claimed");
});

t.test("a Live URL over plain http to a host other than this machine: the start stops with one line", async (t) => {
  const { credential: live } = await createInternalCredential(core.app.db.em.fork(), "live watcher over http", ["observe"], "live");
  const w = spawnWatcher(t, { RPC_URL: core.rpcUrl, WATCHER_CREDENTIAL_LIVE: live, BITCOIN_LIVE_RPC_URL: "http://watcher:secret@192.0.2.10:8332" });
  t.equal(await w.exited, 1, "exits 1");
  t.same(w.output().trim().split("\n"), [
    "payments: BITCOIN_LIVE_RPC_URL must be https to a host other than this machine (192.0.2.10 over http): anyone on the path could answer for a Live node; on a private network set ALLOW_INSECURE_LIVE_RPC=1",
  ], "one line saying why, and nothing else");
});
