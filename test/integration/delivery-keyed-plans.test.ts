// A worker's claim and finish over a batch in one day's partition are planned once per connection
// (services/delivery/webhook-deliveries.ts onePartition, platform/prepared.ts executeByKey): the
// plan kept from when the day held ten deliveries must still read a batch by key once a burst has
// filled the day, before any ANALYZE has run. A plan that read the partition as it was planned
// (a sequential scan, or a whole index) would read every delivery of the burst for each batch.
// What each statement read is PostgreSQL's own count for the partition (pg_stat_user_tables).
import t, { type Test } from "tap";
import pg from "pg";
import { openDatabase } from "../../services/app/database.ts";
import { claimDeliveries, finishAttempts, type AttemptRecord } from "../../services/delivery/webhook-deliveries.ts";
import { newTimedId } from "../../services/platform/ids.ts";
import { ensurePartitions, listPartitions, partitionName } from "../../services/retention/partitions.ts";
import { createTestDatabase } from "../helpers/harness.ts";
import { partitionsFrom } from "../helpers/partition-layout.ts";

const url = await createTestDatabase(t);
const db = await openDatabase(url);
t.teardown(() => db.close());
await db.migrator.up();
await ensurePartitions(db.em.fork());
const em = () => db.em.fork();
const sql = new pg.Client({ connectionString: url });
await sql.connect();
t.teardown(() => sql.end());
const day = 86_400_000;
const cutover = (await listPartitions(em())).find((p) => p.table === "webhook_deliveries" && p.from === undefined)!.to;

await sql.query(`insert into merchants (id, name, created_at) values ('mer_keyed', 'Keyed', now())`);
await sql.query(`insert into webhook_endpoints (id, merchant_id, environment, url, status, secret_ciphertext, created_at) values ('we_keyed', 'mer_keyed', 'test', 'https://hooks.example.test/k', 'enabled', '\\x00', now())`);

/** A day after the cutover, so its deliveries have a partition of their own; `at` for the n-th delivery made in it. */
const first = Math.floor(cutover.getTime() / day) * day + 2 * day;
const at = (n: number) => new Date(first + 2 * 3_600_000 + n);
const deliveries = partitionName("webhook_deliveries", new Date(first));
const events = partitionName("webhook_events", new Date(first));

let made = 0;
/** `count` pending, published deliveries (and their events) in the day, in one statement each. */
async function make(count: number): Promise<{ id: string; eventId: string }[]> {
  const rows = Array.from({ length: count }, () => {
    const when = at(made++);
    return { id: newTimedId("wd", when), eventId: newTimedId("evt", when), at: when.toISOString() };
  });
  await sql.query(
    `insert into webhook_events (id, merchant_id, environment, type, payload, created_at)
     select e, 'mer_keyed', 'test', 'webhook.test', '{"n":1}', a from unnest($1::text[], $2::timestamptz[]) as u(e, a)`,
    [rows.map((r) => r.eventId), rows.map((r) => r.at)],
  );
  await sql.query(
    `insert into webhook_deliveries (id, merchant_id, environment, event_id, endpoint_id, status, attempt_count, published_at, created_at, updated_at)
     select d, 'mer_keyed', 'test', e, 'we_keyed', 'pending', 0, a, a, a from unnest($1::text[], $2::text[], $3::timestamptz[]) as u(d, e, a)`,
    [rows.map((r) => r.id), rows.map((r) => r.eventId), rows.map((r) => r.at)],
  );
  return rows;
}

/** One pending, published delivery and its event, made at `at` (its id's time). */
async function makeAt(at: Date): Promise<{ id: string; eventId: string }> {
  const id = newTimedId("wd", at);
  const eventId = newTimedId("evt", at);
  await sql.query(`insert into webhook_events (id, merchant_id, environment, type, payload, created_at) values ($1, 'mer_keyed', 'test', 'webhook.test', '{"n":1}', $2)`, [eventId, at]);
  await sql.query(
    `insert into webhook_deliveries (id, merchant_id, environment, event_id, endpoint_id, status, attempt_count, published_at, created_at, updated_at)
     values ($1, 'mer_keyed', 'test', $2, 'we_keyed', 'pending', 0, $3, $3, $3)`,
    [id, eventId, at],
  );
  return { id, eventId };
}

const finished = (id: string): AttemptRecord => ({
  deliveryId: id, number: 1, startedAt: new Date(), durationMs: 3, statusCode: 200, error: undefined,
  outcome: "success", excerpt: undefined, status: "delivered", nextAttemptAt: undefined, lastError: undefined,
});

/** Claims and finishes the batch, as a worker does; each claimed with its event read in the claim. */
async function claimAndFinish(t: Test, batch: { id: string; eventId: string }[]): Promise<void> {
  const claims = await claimDeliveries(em(), batch.map((b, i) => ({ id: b.id, seq: 1000 + made + i, eventId: b.eventId })), new Date(), 60_000);
  t.same(claims.map((c) => ("claimed" in c ? JSON.parse(c.claimed.payload) : c)), batch.map(() => ({ n: 1 })), "each claimed, with its event");
  t.same(await finishAttempts(em(), batch.map((b) => finished(b.id))), batch.map(() => true), "and finished");
}

type Counts = { seq_scan: number; seq_tup_read: number; idx_scan: number; idx_tup_fetch: number; n_tup_upd: number };
async function counts(table: string): Promise<Counts> {
  const { rows } = await sql.query<Record<keyof Counts, string>>(
    `select seq_scan, seq_tup_read, coalesce(idx_scan, 0) as idx_scan, coalesce(idx_tup_fetch, 0) as idx_tup_fetch, n_tup_upd from pg_stat_user_tables where relname = $1`,
    [table],
  );
  const r = rows[0]!;
  return { seq_scan: Number(r.seq_scan), seq_tup_read: Number(r.seq_tup_read), idx_scan: Number(r.idx_scan), idx_tup_fetch: Number(r.idx_tup_fetch), n_tup_upd: Number(r.n_tup_upd) };
}
/** Each backend reports its counts within seconds of its statements (not at once): waits until `ready` holds. */
async function countsWhen(table: string, ready: (c: Counts) => boolean): Promise<Counts> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    await sql.query("select pg_stat_clear_snapshot()");
    const c = await counts(table);
    if (ready(c)) return c;
    if (Date.now() > deadline) throw new Error(`${table}'s counts never showed the statements: ${JSON.stringify(c)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

t.test("a claim and a finish planned on a day of ten deliveries still read their batch by key once a burst has filled the day", async (t) => {
  // No ANALYZE of the day but this one, at ten deliveries (the burst's comes a minute later, or never).
  for (const table of [deliveries, events]) await sql.query(`alter table ${table} set (autovacuum_enabled = false)`);
  const small = await make(10);
  await sql.query(`analyze ${deliveries}; analyze ${events}`);
  // Planned here, on the day as it is now: each connection of the pool plans each statement once.
  for (const d of small.slice(0, 8)) await claimAndFinish(t, [d]);
  // The eight claims and finishes reported, so that what follows counts only the batch after the burst.
  const before = await countsWhen(deliveries, (c) => c.n_tup_upd >= 16);
  const eventsBefore = await counts(events);

  const burst = 20_000;
  await make(burst);
  const batch = await make(3);
  await claimAndFinish(t, batch);

  // Its six updates reported, and the events it read with them (the same backend's report).
  const after = await countsWhen(deliveries, (c) => c.n_tup_upd >= before.n_tup_upd + 6);
  const eventsAfter = await countsWhen(events, (c) => c.idx_scan + c.seq_scan > eventsBefore.idx_scan + eventsBefore.seq_scan);
  t.equal(after.seq_scan - before.seq_scan, 0, "no sequential scan of the day's deliveries");
  t.ok(after.idx_tup_fetch - before.idx_tup_fetch <= 30, `the deliveries read by key: ${after.idx_tup_fetch - before.idx_tup_fetch} rows fetched for 3 claims and 3 finishes, of ${burst + 13} in the day`);
  t.equal(eventsAfter.seq_scan - eventsBefore.seq_scan, 0, "no sequential scan of the day's events");
  t.ok(eventsAfter.idx_tup_fetch - eventsBefore.idx_tup_fetch <= 10, `the events read by key: ${eventsAfter.idx_tup_fetch - eventsBefore.idx_tup_fetch} rows fetched`);
});

t.test("a day dropped after its batches were claimed there: a later claim of it reads the table, and finds nothing", async (t) => {
  const gone = new Date(first + day);
  const name = partitionName("webhook_deliveries", gone);
  const when = new Date(gone.getTime() + 2 * 3_600_000);
  const made = await makeAt(when);
  await claimAndFinish(t, [made]);
  await sql.query(`alter table webhook_deliveries detach partition ${name}`);
  await sql.query(`drop table ${name}`);
  const later = newTimedId("wd", new Date(when.getTime() + 1000));
  t.same(await claimDeliveries(em(), [{ id: later, seq: 1, eventId: made.eventId }], new Date(), 60_000), [{ skipped: "unknown" }], "the claim answers as for any delivery not found");
  t.same(await finishAttempts(em(), [finished(later)]), [false], "and so does a finish");
});

t.test("days laid out anew under a running worker (the legacy partition ends earlier, today has a partition of its own): its claims and finishes still find today's deliveries", async (t) => {
  // Today's deliveries are in the legacy partition, as this process's copy of the layout says.
  const now = () => makeAt(new Date());
  await claimAndFinish(t, [await now()]);
  // As the scale bench does: the legacy partition made anew ending 3 days ago, each day since with a partition.
  const today = Math.floor(Date.now() / day) * day;
  await partitionsFrom(em(), (q) => sql.query(q), today - 3 * day);
  await claimAndFinish(t, [await now()]);
  await claimAndFinish(t, [await now(), await now()]);
});
