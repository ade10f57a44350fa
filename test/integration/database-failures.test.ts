// The database failures an operator meets besides a stopped server, each tried as the operator
// would against the real PostgreSQL: a database that refuses new connections (maintenance), a
// server left read-only (what a failover does to the old primary) and a database that is gone.
// Clients get 503 unavailable with Retry-After (gRPC: Unavailable), never 500; reads a read-only
// server can serve are served; the very next requests after recovery succeed without a restart,
// and a create refused meanwhile, retried with its Idempotency-Key, makes one intent.
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import pg from "pg";
import t from "tap";
import { ErrorDetailSchema } from "../../gen/payments/v1/options_pb.ts";
import { IntentService } from "../../gen/payments/v1/payment_intents_pb.ts";
import { call, idemKey, sampleIntent, serverUrl, until, type ApiResponse } from "../helpers/harness.ts";
import { webhookSetup, type WebhookSetup } from "../helpers/webhooks.ts";

interface Teardown {
  teardown(fn: () => unknown): void;
}

/** A superuser connection to the server's maintenance database, for what an operator does. */
async function operator(t: Teardown): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: serverUrl });
  await c.connect();
  t.teardown(() => c.end());
  return c;
}

/** Ends every session of the service's database and waits until they have left. */
async function terminateSessions(admin: pg.Client, db: string): Promise<void> {
  await admin.query(`select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()`, [db]);
  await until(
    "the database's sessions have ended",
    async () => (await admin.query(`select count(*)::int as n from pg_stat_activity where datname = $1`, [db])).rows[0].n === 0,
    10_000,
  );
}

const dbName = (s: WebhookSetup) => new URL(s.databaseUrl).pathname.slice(1);

/** The checks every refused request must pass: 503, Retry-After, X-Request-Id, the envelope with code unavailable. */
function unavailableProblems(label: string, r: ApiResponse): string[] {
  const problems: string[] = [];
  if (r.status !== 503) problems.push(`${label}: status ${r.status} ${JSON.stringify(r.body)}`);
  else {
    if (r.headers.get("retry-after") === null) problems.push(`${label}: no Retry-After`);
    if (r.body?.error?.code !== "unavailable") problems.push(`${label}: code ${r.body?.error?.code}`);
    if (!/^req_/.test(r.headers.get("x-request-id") ?? "") || r.body.error.request_id !== r.headers.get("x-request-id")) problems.push(`${label}: request id`);
  }
  return problems;
}

async function setup(t: Teardown) {
  // Each intent sends payment.intent.created to this endpoint, so the worker and relay use the database too.
  const s = await webhookSetup(t, { env: { DB_POOL_SIZE: "4" } });
  await s.createEndpoint();
  const intents = `/api/v1/merchants/${s.creds.merchant}/payment-intents`;
  const create = (key = idemKey()) => call(s.base, "POST", intents, { key: s.creds.key, idempotencyKey: key, body: sampleIntent });
  const list = () => call(s.base, "GET", intents, { key: s.creds.key });
  const get = (id: string) => call(s.base, "GET", `${intents}/${id}`, { key: s.creds.key });
  const first = await create();
  if (first.status !== 200) throw new Error(`create before the failure: ${first.status}`);
  return { s, create, list, get, existing: first.body.data.public_id as string, admin: await operator(t) };
}

t.test("a database that refuses new connections (maintenance): 503 unavailable, then the very next requests succeed", { timeout: 60_000 }, async (t) => {
  const { s, create, list, admin } = await setup(t);
  const db = dbName(s);
  await admin.query(`alter database ${db} allow_connections false`);
  t.teardown(() => admin.query(`alter database ${db} allow_connections true`));
  await terminateSessions(admin, db);

  const problems: string[] = [];
  const refusedKey = idemKey();
  problems.push(...unavailableProblems("create", await create(refusedKey)));
  for (let i = 0; i < 3; i++) {
    problems.push(...unavailableProblems(`create ${i}`, await create()));
    problems.push(...unavailableProblems(`list ${i}`, await list()));
  }
  t.same(problems, [], "every create and list answered 503 unavailable in the envelope");

  const sessions = new Http2SessionManager(s.rpcUrl);
  t.teardown(() => sessions.abort());
  const grpc = createClient(IntentService, createGrpcTransport({ baseUrl: s.rpcUrl, sessionManager: sessions }));
  const grpcErr = await grpc
    .listPaymentIntents({ merchant: s.creds.merchant }, { headers: { authorization: `Bearer ${s.creds.key}` } })
    .then(() => undefined, (e: unknown) => ConnectError.from(e));
  t.equal(grpcErr?.code, Code.Unavailable, "gRPC: Code.Unavailable");
  t.same(grpcErr?.findDetails(ErrorDetailSchema).map((d) => d.code), ["unavailable"], "gRPC: ErrorDetail code unavailable");

  await admin.query(`alter database ${db} allow_connections true`);
  const retried = await create(refusedKey);
  t.equal(retried.status, 200, "the very next create succeeds");
  t.equal((await list()).status, 200, "and the next list");
  const again = await create(refusedKey);
  t.equal(again.body.data.public_id, retried.body.data.public_id, "the refused create, retried with its key, made one intent");
  const rows = await admin.query(`select count(*)::int as n from pg_stat_activity where datname = $1`, [db]);
  t.ok(rows.rows[0].n > 0, "the service holds connections again");
});

t.test("a server left read-only (an old primary after a failover): writes 503, reads served, writes again at once when it is writable", { timeout: 60_000 }, async (t) => {
  const { s, create, list, get, existing, admin } = await setup(t);
  const db = dbName(s);
  await admin.query(`alter database ${db} set default_transaction_read_only = on`);
  t.teardown(() => admin.query(`alter database ${db} reset default_transaction_read_only`));
  await terminateSessions(admin, db);

  const refusedKey = idemKey();
  const problems: string[] = [];
  problems.push(...unavailableProblems("create", await create(refusedKey)));
  const cancel = await call(s.base, "POST", `/api/v1/merchants/${s.creds.merchant}/payment-intents/${existing}/cancel`, { key: s.creds.key, body: {} });
  problems.push(...unavailableProblems("cancel", cancel));
  t.same(problems, [], "writes answer 503 unavailable in the envelope");

  // Reads interleaved with refused writes: read-only sessions opened for them must not outlive the outage.
  for (let i = 0; i < 4; i++) {
    const [one, page, write] = await Promise.all([get(existing), list(), create()]);
    t.equal(one.status, 200, `GET is served by the read-only server (${i})`);
    t.equal(one.body.data?.status, "pending", "and the cancel changed nothing");
    t.equal(page.status, 200, `the list is served (${i})`);
    t.same(unavailableProblems(`create ${i}`, write), []);
  }

  // Writable again, without ending the service's sessions: no connection opened read-only may be handed out again.
  await admin.query(`alter database ${db} reset default_transaction_read_only`);
  const retried = await create(refusedKey);
  t.equal(retried.status, 200, `the very next create succeeds (${retried.status} ${JSON.stringify(retried.body?.error ?? "")})`);
  const more = await Promise.all([create(), create(), create(), create()]);
  t.same(more.map((r) => r.status), [200, 200, 200, 200], "and every create after it");
  const again = await create(refusedKey);
  t.equal(again.headers.get("idempotent-replayed"), "true");
  t.equal(again.body.data.public_id, retried.body.data.public_id, "the refused create, retried with its key, made one intent");
  const n = await s.app.db.em.fork().execute<{ n: number }[]>(`select count(*)::int as n from payment_intents where merchant_id = ?`, [s.creds.merchant]);
  t.equal(n[0]?.n, 6, "nothing half-written: the intent before, the retried one and the four after");
});

t.test("a database that is gone: 503 unavailable, never 500", { timeout: 60_000 }, async (t) => {
  const { s, create, list, admin } = await setup(t);
  const db = dbName(s);
  await admin.query(`drop database ${db} with (force)`);
  const problems = [...unavailableProblems("create", await create()), ...unavailableProblems("list", await list())];
  t.same(problems, [], "create and list answer 503 unavailable");
});
