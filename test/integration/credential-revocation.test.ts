// Verified credentials are cached in each process, and revocation still takes effect at once
// everywhere: two service processes on one database both answer a key (so both hold it), the
// admin CLI (a third process) revokes it and returns once both have confirmed they dropped it,
// and the very next request to either is refused. The
// same for a site credential and a cashier session. Then the LISTEN connection that carries
// revocations is cut, and a key revoked while it is down is refused all the same.
import t from "tap";
import pg from "pg";
import { call, idemKey, sampleIntent, until } from "../helpers/harness.ts";
import { freePort, serviceSystem, spawnService } from "../helpers/processes.ts";

const s = await serviceSystem(t);
const ports = { PORT: String(await freePort()), RPC_PORT: String(await freePort()), OPS_PORT: String(await freePort()) };
const second = spawnService(t, ["rpc", "gateway"], { ...s.env, ...ports });
await second.started;
const bases = { first: s.base, second: `http://127.0.0.1:${ports.PORT}` };
const m = `/api/v1/merchants/${s.creds.merchant}`;

async function newKey(): Promise<{ id: string; key: string }> {
  const created = await s.admin("api-key", "create", "--merchant", s.creds.merchant, "--environment", "test", "--scopes", "payment_intents:read,payment_intents:write");
  const body = JSON.parse(created.stdout);
  return { id: body.id, key: body.api_key };
}

t.test("an API key revoked by the CLI is refused at once by both processes", async (t) => {
  const { id, key } = await newKey();
  for (const [name, base] of Object.entries(bases)) {
    for (let i = 0; i < 3; i++) t.equal((await call(base, "GET", `${m}/payment-intents?limit=1`, { key })).status, 200, `${name} process answers the key (${i + 1})`);
  }
  const revoked = await s.admin("api-key", "revoke", "--id", id);
  t.equal(revoked.code, 0, "the CLI revokes it");
  for (const [name, base] of Object.entries(bases)) {
    const res = await call(base, "GET", `${m}/payment-intents?limit=1`, { key });
    t.equal(res.status, 401, `the next request to the ${name} process is refused`);
    t.equal(res.body.error?.code, "invalid_api_key", "as invalid_api_key");
    const create = await call(base, "POST", `${m}/payment-intents`, { key, idempotencyKey: idemKey(), body: sampleIntent });
    t.equal(create.status, 401, `and so is a create on the ${name} process`);
  }
  t.equal((await call(bases.second, "GET", `${m}/payment-intents?limit=1`, { key: s.creds.key })).status, 200, "another key of the merchant still works");
});

t.test("site credentials and cashier sessions are revoked at once too", async (t) => {
  const site = JSON.parse((await s.admin("site-credential", "create", "--merchant", s.creds.merchant, "--environment", "test", "--allowed-origin", "https://shop.example")).stdout);
  const session = JSON.parse((await s.admin("cashier-session", "create", "--merchant", s.creds.merchant, "--environment", "test", "--cashier", "Ada")).stdout);
  const siteCall = (base: string) =>
    call(base, "POST", "/api/v1/site-payment-intents", { key: site.credential, idempotencyKey: idemKey(), body: sampleIntent, headers: { origin: "https://shop.example" } });
  const posCall = (base: string) => call(base, "POST", "/api/v1/terminal/pos/payment", { key: session.session, idempotencyKey: idemKey(), body: sampleIntent });
  for (const base of Object.values(bases)) {
    t.equal((await siteCall(base)).status, 200, "the site credential creates an intent");
    t.equal((await posCall(base)).status, 200, "the cashier session takes a payment");
  }
  t.equal((await s.admin("site-credential", "revoke", "--id", site.id)).code, 0, "the site credential is revoked");
  t.equal((await s.admin("cashier-session", "revoke", "--id", session.id)).code, 0, "the cashier session is revoked");
  for (const [name, base] of Object.entries(bases)) {
    t.equal((await siteCall(base)).status, 401, `the ${name} process refuses the site credential`);
    t.equal((await posCall(base)).status, 401, `the ${name} process refuses the cashier session`);
  }
});

t.test("while the LISTEN connection is down, credentials are read from the database", async (t) => {
  const { key } = await newKey();
  for (const base of Object.values(bases)) t.equal((await call(base, "GET", `${m}/payment-intents?limit=1`, { key })).status, 200, "the key is answered (and cached)");
  const db = new pg.Client({ connectionString: s.databaseUrl });
  await db.connect();
  t.teardown(() => db.end());
  const listeners = async () =>
    (await db.query<{ pid: number }>(`select pid from pg_stat_activity where datname = current_database() and application_name = 'listen credential_changed'`)).rows.map((r) => r.pid);
  const before = await listeners();
  t.equal(before.length, 2, "each process listens for credential changes");
  // Cut both, and revoke without a notification reaching anyone: a cached answer would accept it.
  await db.query(`select pg_terminate_backend(pid) from unnest($1::int[]) as pid`, [before]);
  // A cut backend says so to its client before it leaves pg_stat_activity: once both are gone,
  // each process has been told its LISTEN connection ended (it reconnects after a pause).
  const gone = async () => {
    const alive = (await db.query<{ n: number }>(`select count(*)::int as n from pg_stat_activity where pid = any($1::int[])`, [before])).rows[0]!.n;
    return alive === 0 ? true : undefined;
  };
  await until("the cut LISTEN backends to exit", gone, 10_000);
  await db.query(`update api_keys set revoked_at = now() where secret_hash = encode(sha256($1::bytea), 'hex')`, [key]);
  for (const [name, base] of Object.entries(bases)) {
    t.equal((await call(base, "GET", `${m}/payment-intents?limit=1`, { key })).status, 401, `the ${name} process refuses the key revoked meanwhile`);
  }
  const after = await until("both processes to listen again", async () => ((await listeners()).length === 2 ? true : undefined), 20_000);
  t.ok(after, "both reconnect by themselves");
  for (const base of Object.values(bases)) t.equal((await call(base, "GET", `${m}/payment-intents?limit=1`, { key: s.creds.key })).status, 200, "and serve other keys");
});
