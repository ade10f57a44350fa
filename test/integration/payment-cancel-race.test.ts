// A payment racing a cancel (issue 60): a payment's time is when the core recorded it, with its
// intent's lock held, not when its report arrived. A cancel that commits while a report waits
// (on the intent's row, or on the chain's) comes first: the payment is an exception
// (intent_cancelled), never counts, is told as payment.exception and listed by ops
// payment-exceptions. The waits are made certain: the test holds the row from a connection of its
// own, and lets go only once the cancel and the report both wait behind it (or the cancel has
// committed). Reports come over gRPC as a watcher of the test's own (ChainService for ethereum and
// bitcoin, ObservationService for polygon), read back through REST and signed webhooks.
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import pg from "pg";
import t, { type Test } from "tap";
import { ChainService } from "../../gen/payments/v1/chains_pb.ts";
import { call, idemKey, until, type ApiResponse } from "../helpers/harness.ts";
import { hash, watcherClient } from "../helpers/lifecycle.ts";
import { runCli } from "../helpers/processes.ts";
import { eventsOnce, hookHost, webhookSetup } from "../helpers/webhooks.ts";

// One confirmation counts: a payment in a reported block is told at once.
const s = await webhookSetup(t, { env: { ETHEREUM_CONFIRMATIONS: "1", BITCOIN_CONFIRMATIONS: "1", POLYGON_CONFIRMATIONS: "1" } });
const { base, creds: a } = s;
const exceptions = await call(base, "POST", `/api/v1/merchants/${a.merchant}/webhook-endpoints`, {
  key: a.key,
  body: { url: `https://${hookHost}/exceptions`, enabled_events: ["payment.exception"] },
});
const { client: observations, headers } = await watcherClient(s.app, s.rpcUrl, "test");
const chains = createClient(ChainService, createGrpcTransport({ baseUrl: s.rpcUrl }));
const path = `/api/v1/merchants/${a.merchant}/payment-intents`;
const em = () => s.app.db.em.fork();

type Tx = { tx_hash: string; counted: boolean; reason: string | null };
type Intent = { public_id: string; deposit_address: string; status: string; amount_received: string | null; transactions: Tx[] };
const create = async (network: string, asset: string, amount: string) => {
  const res = await call(base, "POST", path, { key: a.key, idempotencyKey: idemKey(), body: { network, asset, requested_amount: amount } });
  if (res.status !== 200) throw new Error(`create: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data as Intent;
};
const get = async (id: string) => (await call(base, "GET", `${path}/${id}`, { key: a.key })).body.data as Intent;
const cancel = (pi: Intent) => call(base, "POST", `${path}/${pi.public_id}/cancel`, { key: a.key, idempotencyKey: idemKey() });
const told = (id: string) => eventsOnce(s.receiver, exceptions.body.data.signing_secret, "/exceptions").filter((e) => e.type === "payment.exception" && e.data.payment_intent?.public_id === id);

/** A connection of the test's own, in a transaction holding `sql`'s row lock until released. */
async function hold(sql: string, params: unknown[]): Promise<{ release(): Promise<void> }> {
  const client = new pg.Client({ connectionString: s.databaseUrl });
  await client.connect();
  t.teardown(() => client.end());
  await client.query("begin");
  const held = await client.query(sql, params);
  if (held.rowCount !== 1) throw new Error(`no row to hold: ${sql}`);
  return { release: async () => void (await client.query("rollback")) };
}

/** Waits until `n` statements on `table` wait for a lock (queued behind the test's, or behind one another). */
const waiting = (n: number, table: string) =>
  until(`${n} statement(s) waiting on ${table}`, async () => {
    const rows = await em().execute<{ n: number }[]>(
      `select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and query ilike ?`,
      [`%from ${table}%`],
    );
    return (rows[0]?.n ?? 0) >= n;
  }, 20_000);

/** A chain the test's watcher holds on Test, with a tip of its own to report blocks on. */
async function heldChain(network: string) {
  const watcherId = `race-${network}`;
  const lease = await until(`the test's watcher holds ${network}`, async () => {
    const c = await chains.claimChain({ network, watcherId, leaseSeconds: 300 }, { headers });
    return c.active ? c : undefined;
  }, 20_000);
  let tip = { height: 100n, hash: hash() };
  const block = (outputs: { asset: string; toAddress: string; txHash: string; outputIndex: number; amount: string }[]) => {
    const b = { height: tip.height + 1n, hash: hash(), parentHash: tip.hash, outputs };
    tip = { height: b.height, hash: b.hash };
    return chains.reportBlocks({ network, watcherId, leaseEpoch: lease.epoch, blocks: [b], headHeight: b.height }, { headers });
  };
  await block([]);
  const mempool = (outputs: { asset: string; toAddress: string; txHash: string; outputIndex: number; amount: string }[]) =>
    chains.reportMempool({ network, watcherId, leaseEpoch: lease.epoch, tipHash: tip.hash, outputs: outputs.map((output) => ({ output, replaceable: false })), conflicted: [] }, { headers });
  return { block, mempool };
}

/** What the merchant and the operator are shown of a payment recorded after its intent was cancelled. */
async function anException(t: Test, pi: Intent, tx: string, amount: string) {
  const now = await get(pi.public_id);
  t.same([now.status, now.amount_received], ["cancelled", "0"], "cancelled, nothing counted");
  t.match(now.transactions, [{ tx_hash: tx, counted: false, reason: "intent_cancelled" }], "shown as paid after the cancellation");
  const event = await until(`payment.exception of ${pi.public_id}`, async () => told(pi.public_id)[0], 20_000);
  t.match(event.data, { payment_intent: { public_id: pi.public_id, status: "cancelled" }, exception: { reason: "intent_cancelled", transaction: { tx_hash: tx, amount } } }, "told as payment.exception");
  const listed = await runCli("services/app/ops-cli.ts", { DATABASE_URL: s.databaseUrl }, "payment-exceptions", "--merchant", a.merchant, "--json");
  t.equal(listed.code, 0, listed.stderr || "ops payment-exceptions runs");
  const rows = JSON.parse(listed.stdout) as { payment_intent_id: string; reason: string; tx_hash: string }[];
  t.match(rows.filter((r) => r.payment_intent_id === pi.public_id), [{ reason: "intent_cancelled", tx_hash: tx }], "listed by ops payment-exceptions");
  t.equal(told(pi.public_id).length, 1, "told once");
}

const cancelled = (t: Test, res: ApiResponse) => t.equal(res.status, 200, res.status === 200 ? "the cancel commits" : JSON.stringify(res.body));

t.test("a cancel that commits while a block report waits on the intent's lock: the payment is an exception", async (t) => {
  const ethereum = await heldChain("ethereum");
  const pi = await create("ethereum", "USDC", "3");
  const row = await hold(`select 1 from payment_intents where id = $1 for update`, [pi.public_id]);
  // The cancel queues first for the intent's row, then the report (which holds the chain's row by then).
  const cancelling = cancel(pi);
  await waiting(1, "payment_intents");
  const tx = hash();
  const reporting = ethereum.block([{ asset: "USDC", toAddress: pi.deposit_address, txHash: tx, outputIndex: 0, amount: "3" }]);
  await waiting(2, "payment_intents");
  await row.release();
  cancelled(t, await cancelling);
  t.equal((await reporting).settled, 1, "the report, once the cancel committed, settles the intent");
  await anException(t, pi, tx, "3");
});

t.test("a cancel that commits while a mempool report waits on the chain's row: the payment is an exception once mined", async (t) => {
  const bitcoin = await heldChain("bitcoin");
  const pi = await create("bitcoin", "BTC", "0.001");
  const chainRow = await hold(`select 1 from chain_watchers where network = 'bitcoin' and environment = 'test' for update`, []);
  const tx = hash();
  const output = { asset: "BTC", toAddress: pi.deposit_address, txHash: tx, outputIndex: 0, amount: "0.001" };
  const reporting = bitcoin.mempool([output]);
  await waiting(1, "chain_watchers");
  cancelled(t, await cancel(pi));
  await chainRow.release();
  t.equal((await reporting).added, 1, "recorded once the chain's row is free");
  t.match((await get(pi.public_id)).transactions, [{ tx_hash: tx, counted: false, reason: "intent_cancelled" }], "in the mempool: paid after the cancellation, not merely unconfirmed");
  await bitcoin.block([output]);
  await anException(t, pi, tx, "0.001");
});

t.test("a cancel that commits while an operator's observation waits on the intent's lock: the payment is an exception", async (t) => {
  const pi = await create("polygon", "USDC", "2");
  const row = await hold(`select 1 from payment_intents where id = $1 for update`, [pi.public_id]);
  const cancelling = cancel(pi);
  await waiting(1, "payment_intents");
  const tx = hash();
  const observing = observations.recordObservation(
    { network: "polygon", asset: "USDC", toAddress: pi.deposit_address, txHash: tx, outputIndex: 0, amount: "2", confirmations: 1, blockHeight: 7n, blockHash: hash() },
    { headers },
  );
  await waiting(2, "payment_intents");
  await row.release();
  cancelled(t, await cancelling);
  const recorded = await observing;
  t.same([recorded.paymentIntentStatus, recorded.data?.counted], ["cancelled", false], "recorded after the cancel: it does not count");
  await anException(t, pi, tx, "2");
});
