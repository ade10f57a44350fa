// A key's budgets are the same however many processes serve it: three real processes (rpc and
// gateway roles, as behind a load balancer) share one database, and one API key's calls spread
// over all three are held to one budget, over REST and over gRPC, with the same Retry-After
// whichever process refuses. The budget refills one call every 120 s, so the counts do not
// depend on how fast the machine runs the burst.
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import pg from "pg";
import t from "tap";
import { IntentService } from "../../gen/payments/v1/payment_intents_pb.ts";
import { scopes } from "../../services/auth/keys.ts";
import { call, createTestDatabase, deleteStream, idemKey, natsUrl, sampleIntent, uniqueName, type ApiResponse } from "../helpers/harness.ts";
import { freePort, runCli, spawnService, type ServiceProcess } from "../helpers/processes.ts";

const budget = 30;
const processes = 3;
const databaseUrl = await createTestDatabase(t);
const prefix = uniqueName("t");
t.teardown(() => deleteStream(prefix));
const dataDir = mkdtempSync(path.join(tmpdir(), "test-shared-limits-"));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
const common = {
  DATABASE_URL: databaseUrl,
  NATS_URL: natsUrl,
  JETSTREAM_PREFIX: prefix,
  SECRET_ENCRYPTION_KEY: randomBytes(32).toString("hex"),
  HOST: "127.0.0.1",
  LOG_LEVEL: "warn",
  DATA_DIR: dataDir,
  API_READ_RATE_LIMIT: String(budget),
  API_WRITE_RATE_LIMIT: String(budget),
  API_RATE_LIMIT_SECONDS: "3600",
  // As operations.md tells a deployment of three: should the shared store not answer, each keeps a third.
  RATE_LIMIT_PROCESSES: String(processes),
};

interface Node {
  process: ServiceProcess;
  base: string;
  rpcUrl: string;
}
async function start(): Promise<Node> {
  const [port, rpcPort, opsPort] = [await freePort(), await freePort(), await freePort()];
  const p = spawnService(t, ["rpc", "gateway"], { ...common, PORT: String(port), RPC_PORT: String(rpcPort), OPS_PORT: String(opsPort) });
  await p.started;
  return { process: p, base: `http://127.0.0.1:${port}`, rpcUrl: `http://127.0.0.1:${rpcPort}` };
}
const nodes: Node[] = [];
// A failure shows what the processes logged (a shared store that did not answer, say).
t.teardown(() => {
  if (t.passing()) return;
  for (const [i, n] of nodes.entries()) t.comment(`process ${i + 1}:\n${n.process.output().slice(-4000)}`);
});
// One after the other: the first applies the migrations, and three starting at once on a busy
// machine could outlast the helper's 30 s for a start.
for (let i = 0; i < processes; i++) nodes.push(await start());

const admin = (...args: string[]) => runCli("services/app/admin.ts", { DATABASE_URL: databaseUrl, DATA_DIR: dataDir }, ...args);
const made = await admin("merchant", "create", "--name", "Shared Limits Shop");
const merchant: string = JSON.parse(made.stdout).id;
const keyRun = await admin("api-key", "create", "--merchant", merchant, "--environment", "test", "--scopes", scopes.join(","));
const key: string = JSON.parse(keyRun.stdout).api_key;

const grpcClients = nodes.map((n) => {
  const sessions = new Http2SessionManager(n.rpcUrl);
  t.teardown(() => sessions.abort());
  return createClient(IntentService, createGrpcTransport({ baseUrl: n.rpcUrl, sessionManager: sessions }));
});
const auth = { authorization: `Bearer ${key}` };
const create = (i: number) => call(nodes[i % processes]!.base, "POST", `/api/v1/merchants/${merchant}/payment-intents`, { key, idempotencyKey: idemKey(), body: sampleIntent });
const grpcList = (i: number) =>
  grpcClients[i % processes]!.listPaymentIntents({ merchant, limit: 1 }, { headers: auth }).then(
    () => undefined,
    (e: unknown) => ConnectError.from(e),
  );
const intents = async () => {
  const db = new pg.Client(databaseUrl);
  await db.connect();
  try {
    return (await db.query<{ n: number }>(`select count(*)::int as n from payment_intents where merchant_id = $1`, [merchant])).rows[0]?.n;
  } finally {
    await db.end();
  }
};
/** Within 10 % of the budget, never under it. */
const within = (served: number) => served >= budget && served <= budget * 1.1;

t.test("writes over REST spread over three processes: one budget", async (t) => {
  const answers = await Promise.all(Array.from({ length: budget * 2 }, (_, i) => create(i)));
  const served = answers.filter((r) => r.status === 200).length;
  t.ok(within(served), `${served} of ${budget * 2} creates served across ${processes} processes (budget ${budget})`);
  t.ok(answers.every((r) => r.status === 200 || (r.status === 429 && r.body.error?.code === "rate_limited")), "the rest refused as rate_limited");
  t.equal(await intents(), served, "the refused creates created nothing");

  // One refusal from each process, one right after the other: each reads the same bucket by the database's clock.
  const refusals: ApiResponse[] = [];
  for (let i = 0; i < processes; i++) refusals.push(await create(i));
  t.same(refusals.map((r) => r.status), [429, 429, 429], "every process refuses the key now");
  const waits = refusals.map((r) => Number(r.headers.get("retry-after")));
  t.ok(waits.every((w) => w >= 1 && w <= 120), `Retry-After within the refill of one call (${waits.join(", ")} s)`);
  t.ok(Math.max(...waits) - Math.min(...waits) <= 1, `the same Retry-After whichever process answers (${waits.join(", ")} s)`);
});

t.test("reads over gRPC spread over three processes: one budget", async (t) => {
  const errors = await Promise.all(Array.from({ length: budget * 2 }, (_, i) => grpcList(i)));
  const served = errors.filter((e) => e === undefined).length;
  t.ok(within(served), `${served} of ${budget * 2} reads served across ${processes} processes (budget ${budget})`);
  for (const e of errors.filter((e) => e !== undefined)) t.equal(e?.code, Code.ResourceExhausted);
  const rest = await call(nodes[0]!.base, "GET", `/api/v1/merchants/${merchant}/payment-intents?limit=1`, { key });
  t.equal(rest.status, 429, "and REST reads share the gRPC reads' bucket");
});
