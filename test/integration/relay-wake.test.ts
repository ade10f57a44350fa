// The outbox relay woken by its own process's creates (services/delivery/relay.ts, outbox-wake.ts):
// only its newest loop runs for a create's wake, and a pass that takes fewer than its batch is
// not followed by one that finds nothing; so no wake may be lost between a pass and the next, and
// a backlog's oldest, the other loop's, must still go out without waiting for a poll. The relay
// here polls once in ten minutes: whatever goes out within the test went out because it was woken.
// Real PostgreSQL (the service's migrations and partitions), real NATS JetStream.
import pg from "pg";
import t from "tap";
import { ensureDeliveryStream, streamNames } from "../../services/delivery/jetstream.ts";
import { OutboxWake } from "../../services/delivery/outbox-wake.ts";
import { startRelay } from "../../services/delivery/relay.ts";
import { schedule } from "../../services/delivery/schedule.ts";
import { createLogger } from "../../services/platform/logger.ts";
import { Nats } from "../../services/platform/nats.ts";
import { deleteStream, natsUrl, uniqueName, until } from "../helpers/harness.ts";
import { outboxDatabase, outboxDeliveries } from "../helpers/outbox.ts";

const { databaseUrl, db, em } = await outboxDatabase(t);

const prefix = uniqueName("relaywake").toLowerCase();
const names = streamNames(prefix);
const logger = createLogger("silent");
const nats = new Nats(natsUrl, logger, "relay-wake-test");
t.teardown(async () => {
  await nats.close();
  await deleteStream(prefix);
});
let ensured: Promise<unknown> | undefined;
const streamReady = async () => {
  ensured ??= ensureDeliveryStream(await nats.connected, names, schedule([60, 300], 3), { installation: prefix, prefix }, 1, 1000);
  await ensured;
};
await streamReady();

const wake = new OutboxWake();
const relay = startRelay({ db, databaseUrl, nats, names, logger, streamReady, pollMs: 600_000, outboxWake: wake });
t.teardown(() => relay.stop());

const deliveries = (count: number, parked = false) => outboxDeliveries(em(), count, parked);

/** A connection of its own (an advisory lock held across statements). */
async function pgClient(): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: databaseUrl });
  await c.connect();
  t.teardown(() => c.end());
  return c;
}

let left = 0;
/** How many of `ids` are not yet published (also kept in `left`, for a deadline's message). */
async function unpublished(ids: readonly string[]): Promise<number> {
  const [row] = await em().execute<{ n: string }[]>(`select count(*) as n from webhook_deliveries where published_at is null and id in (?)`, [ids]);
  return (left = Number(row?.n));
}

// The relay's LISTEN connection wakes both loops once it listens: the cases begin after it does,
// and once no other connection of this database is in a statement or a transaction three times in
// a row, 50 ms apart (both loops' passes over). From then on only the cases' wakes run a pass: the
// deliveries are committed without a NOTIFY, and the relay polls once in ten minutes.
await until(
  "the relay listening",
  async () => (await em().execute(`select 1 from pg_stat_activity where datname = current_database() and application_name = 'listen webhook_outbox'`)).length > 0,
  10_000,
);
for (let quiet = 0, deadline = Date.now() + 10_000; quiet < 3; ) {
  if (Date.now() > deadline) throw new Error("the relay's connections were never idle three times in a row");
  const [busy] = await em().execute<{ n: string }[]>(
    `select count(*) as n from pg_stat_activity where datname = current_database() and backend_type = 'client backend' and pid <> pg_backend_pid() and state <> 'idle'`,
  );
  quiet = Number(busy?.n) === 0 ? quiet + 1 : 0;
  await new Promise((r) => setTimeout(r, 50));
}

t.test("a create committed while a pass runs is published by its wake, not by the next poll", async (t) => {
  // The pass is held inside its statement, after it took A and before it commits: a test trigger
  // on the relay's update waits for an advisory lock this test holds.
  const holder = await pgClient();
  await em().execute(
    `create function relay_wake_hold() returns trigger as $$ begin perform pg_advisory_xact_lock_shared(4242); return new; end; $$ language plpgsql;
     create trigger relay_wake_hold before update on webhook_deliveries for each row execute function relay_wake_hold()`,
  );
  t.teardown(() => em().execute(`drop trigger relay_wake_hold on webhook_deliveries; drop function relay_wake_hold()`));
  const waiters = async () =>
    Number(
      (
        await em().execute<{ n: string }[]>(
          `select count(*) as n from pg_locks where locktype = 'advisory' and objid = 4242 and not granted and database = (select oid from pg_database where datname = current_database())`,
        )
      )[0]?.n,
    );
  await holder.query("select pg_advisory_lock(4242)");
  let a: string[];
  let b: string[];
  try {
    a = await deliveries(1);
    wake.wake();
    await until("the pass held after taking A", async () => (await waiters()) > 0, 10_000);
    b = await deliveries(1);
    wake.wake();
  } finally {
    // Released whatever happened: a pass held in the trigger would hold up its drop.
    await holder.query("select pg_advisory_unlock(4242)");
  }
  await until("A published", async () => (await unpublished(a)) === 0, 10_000, () => `A unpublished`);
  await until("B published", async () => (await unpublished(b)) === 0, 10_000, () => `B unpublished: its wake, which came during A's pass, was lost`);
  t.pass("B went out on its wake");
});

t.test("every create's wake is taken, however it falls among the relay's passes", async (t) => {
  const ids: string[] = [];
  for (let round = 0; round < 60; round++) {
    ids.push(...(await deliveries(1 + (round % 3))));
    wake.wake();
    // Some commits land while a pass runs, some between passes, some in a burst.
    if (round % 4 === 0) await new Promise((r) => setTimeout(r, round % 8 === 0 ? 0 : 3));
  }
  await until("every delivery published", async () => (await unpublished(ids)) === 0, 20_000, () => `${left} of ${ids.length} unpublished`);
  t.pass(`${ids.length} deliveries, each published by a wake, none by a poll`);
});

t.test("a backlog past a pass goes out whole on one wake, and the other loop's parked retries with it", async (t) => {
  // Parked retries are the other loop's lane; committed quietly, nothing wakes that loop for them...
  const parked = await deliveries(5, true);
  // ...until a create's wake finds a full pass (the relay's batch of 500: 125 new ones a pass).
  const backlog = await deliveries(400);
  wake.wake();
  await until("the backlog published", async () => (await unpublished(backlog)) === 0, 20_000, () => `${left} of ${backlog.length} unpublished`);
  await until("the parked retries published", async () => (await unpublished(parked)) === 0, 20_000, () => `${left} of ${parked.length} unpublished`);
  t.pass("both published without a poll");
});
