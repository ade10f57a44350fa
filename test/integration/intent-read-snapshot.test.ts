// A read of an intent is one snapshot: its row and its transactions agree, even when a
// settlement commits between the two reads. The commit is placed there for certain: the test
// holds a lock on the outputs' table, so the GET waits after reading the intent's row; the
// test then records a second output and the intent's new status, commits, and reads the answer.
import { randomBytes } from "node:crypto";
import pg from "pg";
import t, { type Test } from "tap";
import { call, idemKey, merchantWithKey, startTestApp, until } from "../helpers/harness.ts";

const s = await startTestApp(t);
const a = await merchantWithKey(s.app);
const path = `/api/v1/merchants/${a.merchant}/payment-intents`;

/** An intent underpaid with 4 of its 10 USDC (one transaction). */
async function underpaid(): Promise<{ public_id: string }> {
  const created = await call(s.base, "POST", path, { key: a.key, idempotencyKey: idemKey(), body: { network: "ethereum", asset: "USDC", requested_amount: "10" } });
  const pi = created.body.data as { public_id: string };
  const simulated = await call(s.base, "POST", `/api/v1/sandbox/merchants/${a.merchant}/payment-intents/${pi.public_id}/simulate`, { key: a.key, body: { outcome: "underpaid", amount: "4" } });
  if (simulated.body.data.status !== "underpaid") throw new Error(`simulate: ${JSON.stringify(simulated.body)}`);
  return pi;
}

async function settleDuring<R>(pi: { public_id: string }, read: () => Promise<R>): Promise<R> {
  const client = new pg.Client({ connectionString: s.databaseUrl });
  await client.connect();
  t.teardown(() => client.end());
  await client.query("begin");
  await client.query("lock table chain_observations in access exclusive mode");
  const answer = read();
  await until("the read waits on the outputs' table", async () => {
    // (A statement run through the extended protocol may show another text: the wait itself is what counts.)
    const r = await client.query(`select 1 from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and pid <> pg_backend_pid()`);
    return r.rowCount !== null && r.rowCount > 0;
  }, 20_000);
  // What a settlement commits: a second output, counted, and the status it makes.
  const [{ id, network, environment, deposit_address }] = (
    await client.query(`select id, network, environment, deposit_address from payment_intents where id = $1`, [pi.public_id])
  ).rows;
  await client.query(
    `insert into chain_observations (network, environment, asset, to_address, tx_hash, output_index, amount, confirmations, block_height, block_hash,
       observed_at, payment_intent_id, simulated, counted, created_at, updated_at)
     values ($1, $2, 'USDC', $3, $4, 0, 6, 12, null, null, now(), $5, true, true, now(), now())`,
    [network, environment, deposit_address, randomBytes(32).toString("hex"), id],
  );
  await client.query(`update payment_intents set status = 'confirmed', amount_received = 10, sequence = sequence + 1 where id = $1`, [id]);
  await client.query("commit");
  return answer;
}

type Intent = { status: string; amount_received: string; transactions: { amount: string; counted: boolean }[] };
function agrees(t: Test, pi: Intent, what: string) {
  const counted = pi.transactions.filter((x) => x.counted).reduce((sum, x) => sum + Number(x.amount), 0);
  t.equal(counted, Number(pi.amount_received), `${what}: amount_received is what its counted transactions add up to`);
  t.ok((pi.status === "confirmed") === (counted >= 10), `${what}: status ${pi.status} with ${pi.transactions.length} transaction(s)`);
}

t.test("GET: the row and its transactions from one snapshot", async (t) => {
  const pi = await underpaid();
  const res = await settleDuring(pi, () => call(s.base, "GET", `${path}/${pi.public_id}`, { key: a.key }));
  agrees(t, res.body.data as Intent, "during the commit");
  const after = (await call(s.base, "GET", `${path}/${pi.public_id}`, { key: a.key })).body.data as Intent;
  agrees(t, after, "after it");
  t.equal(after.status, "confirmed");
});

t.test("list: each intent and its transactions from one snapshot", async (t) => {
  const pi = await underpaid();
  const res = await settleDuring(pi, () => call(s.base, "GET", `${path}?public_id=${pi.public_id}`, { key: a.key }));
  const [listed] = res.body.data as Intent[];
  agrees(t, listed as Intent, "during the commit");
  const [after] = (await call(s.base, "GET", `${path}?public_id=${pi.public_id}`, { key: a.key })).body.data as Intent[];
  agrees(t, after as Intent, "after it");
  t.equal(after?.status, "confirmed");
});
