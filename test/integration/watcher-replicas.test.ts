// Replicas of the all-in-one service (`main.ts` with no role arguments: every role, the chain
// watcher too) on one database, one NATS prefix and one anvil chain (issue 40, item 3): no start
// switches another process's watcher off. Killing either process, by SIGKILL or SIGTERM, leaves
// the other following the chain: a payment made afterwards is counted within the lease time and
// a margin. A clean stop revokes the stopping process's own credential, and only that one.
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import t from "tap";
import type { Hex } from "viem";
import { signPayment, startDevChain } from "../../scripts/devchain/chain.ts";
import { scopes } from "../../services/auth/keys.ts";
import { call, createTestDatabase, deleteStream, idemKey, natsUrl, uniqueName, until } from "../helpers/harness.ts";
import { freePort, runCli, spawnService, type ServiceProcess } from "../helpers/processes.ts";

const leaseSeconds = 5;
/** A payment is counted within the lease (a dead holder's chain waits that long) and this margin (a loaded 2-core machine). */
const countedWithinMs = leaseSeconds * 1000 + 25_000;

const dev = await startDevChain();
t.teardown(() => dev.stop());
const databaseUrl = await createTestDatabase(t);
const prefix = uniqueName("t");
t.teardown(() => deleteStream(prefix));
const masterKey = randomBytes(32).toString("hex");

const db = new pg.Pool({ connectionString: databaseUrl, max: 2 });
t.teardown(() => db.end());
const query = async <T>(sql: string, params: unknown[] = []) => (await db.query(sql, params)).rows as T[];

interface Replica {
  name: string;
  process: ServiceProcess;
  base: string;
  pid: number;
}

/** One all-in-one process (no role arguments) with ports and a data directory of its own. */
async function startReplica(name: string): Promise<Replica> {
  const dataDir = mkdtempSync(path.join(tmpdir(), "test-replica-"));
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  const ports = new Set<number>();
  while (ports.size < 3) ports.add(await freePort());
  const [port, rpcPort, opsPort] = [...ports];
  const p = spawnService(t, [], {
    DATABASE_URL: databaseUrl,
    NATS_URL: natsUrl,
    JETSTREAM_PREFIX: prefix,
    SECRET_ENCRYPTION_KEY: masterKey,
    HOST: "127.0.0.1",
    PORT: String(port),
    RPC_PORT: String(rpcPort),
    OPS_PORT: String(opsPort),
    DATA_DIR: dataDir,
    LOG_LEVEL: "info",
    ETHEREUM_TEST_RPC_URL: dev.url,
    ETHEREUM_CONFIRMATIONS: "1",
    WATCHER_POLL_MS: "100",
    WATCHER_LEASE_SECONDS: String(leaseSeconds),
  });
  await p.started;
  return { name, process: p, base: `http://127.0.0.1:${port}`, pid: p.child.pid as number };
}

const holderPid = async () => {
  const row = (await query<{ holder: string }>(`select holder from chain_watchers where network = 'ethereum' and environment = 'test' and lease_expires_at > now()`))[0];
  return Number(/-(\d+)-[0-9a-f]+$/.exec(row?.holder ?? "")?.[1]);
};
const holds = (r: Replica) => until(`${r.name} holds the lease`, async () => (await holderPid()) === r.pid, 30_000, () => r.process.output().slice(-2000));
const standsBy = (r: Replica) =>
  until(`${r.name} says it stands by`, async () => /another watcher follows the chain; standing by/.test(r.process.output()), 30_000, () => r.process.output().slice(-2000));

const first = await startReplica("P1");
await holds(first);
const made = await runCli("services/app/admin.ts", { DATABASE_URL: databaseUrl, SECRET_ENCRYPTION_KEY: masterKey }, "merchant", "create", "--name", "Replica Shop");
if (made.code !== 0) throw new Error(`merchant create: ${made.stderr}`);
const merchant: string = JSON.parse(made.stdout).id;
const keyed = await runCli("services/app/admin.ts", { DATABASE_URL: databaseUrl, SECRET_ENCRYPTION_KEY: masterKey }, "api-key", "create", "--merchant", merchant, "--environment", "test", "--scopes", scopes.join(","));
if (keyed.code !== 0) throw new Error(`api-key create: ${keyed.stderr}`);
const key: string = JSON.parse(keyed.stdout).api_key;
const intents = `/api/v1/merchants/${merchant}/payment-intents`;

/** A Test intent created through `via`'s REST API, paid on the chain (one block: counted at 1 confirmation), then confirmed within the deadline. */
async function paidAndCounted(via: Replica): Promise<void> {
  const created = await call(via.base, "POST", intents, { key, idempotencyKey: idemKey(), body: { network: "ethereum", asset: "USDC", requested_amount: "3" } });
  if (created.status !== 200) throw new Error(`create: ${created.status} ${JSON.stringify(created.body)}`);
  const pi = created.body.data as { public_id: string; deposit_address: Hex };
  await signPayment(dev, pi.deposit_address, "3", "USDC", 6);
  await dev.test.mine({ blocks: 1 });
  await until(
    `${pi.public_id} confirmed (counted by ${via.name}'s watcher or its standby)`,
    async () => (await call(via.base, "GET", `${intents}/${pi.public_id}`, { key })).body.data?.status === "confirmed",
    countedWithinMs,
    () => `${via.name}: ${via.process.output().slice(-3000)}`,
  );
}

interface CredentialRow {
  id: string;
  name: string;
  expires_at: Date | null;
  revoked_at: Date | null;
}
const inProcessCredentials = () => query<CredentialRow>(`select id, name, expires_at, revoked_at from internal_credentials where name like 'in-process chain watcher%' order by created_at`);
const credentialOf = async (r: Replica) => (await inProcessCredentials()).filter((c) => c.name.endsWith(`-${r.pid}`));

t.test("the standby is SIGKILLed: the first process's watcher goes on counting", async (t) => {
  const second = await startReplica("P2");
  await standsBy(second);
  await second.process.kill("SIGKILL");
  await paidAndCounted(first);
  t.equal(await holderPid(), first.pid, "P1 still follows the chain");
  t.notMatch(first.process.output(), /invalid_api_key|Unauthenticated/, "P1's watcher was never refused");
});

t.test("the standby stops cleanly (SIGTERM): its own credential is revoked, the first's is not", async (t) => {
  const third = await startReplica("P3");
  await standsBy(third);
  const [mine] = await credentialOf(third);
  t.ok(mine, "P3 has a credential of its own, named after its host and pid");
  t.ok(mine?.expires_at, "it expires on its own");
  t.equal(mine?.revoked_at, null, "while P3 runs, it is not revoked");
  await third.process.kill("SIGTERM");
  t.equal(await third.process.exited, 0, "SIGTERM: a clean exit");
  const [after] = await credentialOf(third);
  t.ok(after?.revoked_at, "P3's clean stop revoked its credential");
  const [p1] = await credentialOf(first);
  t.ok(p1 && p1.revoked_at === null && p1.expires_at && p1.expires_at.getTime() > Date.now(), "P1's credential is live");
  await paidAndCounted(first);
  t.notMatch(first.process.output(), /invalid_api_key|Unauthenticated/, "P1's watcher was never refused");
});

/** The process that follows the chain now (the next test stops it). */
let holder = first;

t.test("the lease holder is SIGKILLed: the standby takes over and counts", async (t) => {
  const fourth = await startReplica("P4");
  await standsBy(fourth);
  await first.process.kill("SIGKILL");
  await paidAndCounted(fourth);
  t.equal(await holderPid(), fourth.pid, "P4 took the lease");
  t.match(fourth.process.output(), /following the chain/);
  holder = fourth;
});

t.test("the lease holder stops cleanly (SIGTERM): the standby takes over and counts", async (t) => {
  const fifth = await startReplica("P5");
  await standsBy(fifth);
  t.equal(await holderPid(), holder.pid, `${holder.name} holds the lease`);
  const [held] = await credentialOf(holder);
  t.ok(held && held.revoked_at === null, `${holder.name}'s credential is live before it stops`);
  await holder.process.kill("SIGTERM");
  t.equal(await holder.process.exited, 0, "SIGTERM: a clean exit");
  t.ok((await credentialOf(holder))[0]?.revoked_at, `${holder.name}'s clean stop revoked its credential`);
  await paidAndCounted(fifth);
  t.equal(await holderPid(), fifth.pid, "P5 took the lease");
  const [own] = await credentialOf(fifth);
  t.ok(own && own.revoked_at === null, `P5's credential was untouched by ${holder.name}'s stop`);
  await fifth.process.kill("SIGTERM");
  t.equal(await fifth.process.exited, 0);
});
