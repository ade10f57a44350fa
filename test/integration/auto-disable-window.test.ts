// Auto-disable (services/webhooks/operations.ts autoDisableFailing) reads an endpoint's failures and
// its newest success, not its history (issue 50: it runs every minute beside months of deliveries):
// its decisions over deliveries in day partitions and in the legacy partition, with the attempts in
// their delivery's day, and the window it looks back over (the period and the attempt span).
import t from "tap";
import { openDatabase } from "../../services/app/database.ts";
import { newTimedId } from "../../services/platform/ids.ts";
import { ensurePartitions } from "../../services/retention/partitions.ts";
import { autoDisableFailing } from "../../services/webhooks/operations.ts";
import { createTestDatabase } from "../helpers/harness.ts";
import { partitionsFrom } from "../helpers/partition-layout.ts";

const db = await openDatabase(await createTestDatabase(t));
t.teardown(() => db.close());
await db.migrator.up();
await ensurePartitions(db.em.fork());
const em = () => db.em.fork();
const hour = 3_600_000;
const now = new Date();
const ago = (hours: number) => new Date(now.getTime() - hours * hour);
const after = 48 * 3600;
const span = 24 * 3600;

// Upgraded yesterday: the legacy partition (empty here) holds what came before yesterday, and each day since has its own.
const day = 24 * hour;
const firstDay = Math.floor(now.getTime() / day) * day - day;
await partitionsFrom(em(), (sql) => em().execute(sql), firstDay);

await em().execute(`insert into merchants (id, name, created_at) values ('mer_ad', 'Auto-disable', now())`);

async function endpoint(name: string): Promise<string> {
  const id = `we_${name}`;
  await em().execute(
    `insert into webhook_endpoints (id, merchant_id, environment, url, status, secret_ciphertext, created_at) values (?, 'mer_ad', 'test', ?, 'enabled', '\\x00', ?)`,
    [id, `https://hooks.example.test/${name}`, ago(24 * 60)],
  );
  return id;
}

let n = 0;
/**
 * A delivery created `createdHoursAgo` with its attempts (hours ago, outcome), ending `status`; its id
 * of the service's shape (with its day: its attempts go to that day) or of the older shape.
 */
async function delivery(endpointId: string, createdHoursAgo: number, status: string, attempts: [number, string][], shape: "day" | "legacy" = "day") {
  n++;
  const createdAt = ago(createdHoursAgo);
  if (shape === "legacy" && createdAt.getTime() >= firstDay) throw new Error("ids of the older shape are from before the upgrade");
  const id = shape === "day" ? newTimedId("wd", createdAt) : `wd_old${n}`;
  const last = attempts.at(-1);
  await em().execute(
    `insert into webhook_deliveries (id, merchant_id, environment, event_id, endpoint_id, status, attempt_count, last_attempt_at, published_at, created_at, updated_at)
     values (?, 'mer_ad', 'test', ?, ?, ?, ?, ?, ?, ?, ?)`,
    [id, `evt_ad${n}`, endpointId, status, attempts.length, last ? ago(last[0]) : null, createdAt, createdAt, last ? new Date(ago(last[0]).getTime() + 1000) : createdAt],
  );
  for (const [i, [hoursAgo, outcome]] of attempts.entries()) {
    await em().execute(
      `insert into webhook_attempts (delivery_id, number, started_at, outcome, delivery_time) values (?, ?, ?, ?, coalesce(payments_id_time(?), '-infinity'))`,
      [id, i + 1, ago(hoursAgo), outcome, id],
    );
  }
}

/** Failed deliveries every `every` hours from `fromHoursAgo` to `toHoursAgo`, each failing twice an hour apart. */
async function failures(endpointId: string, fromHoursAgo: number, toHoursAgo: number, every: number, shape: "day" | "legacy" = "day") {
  for (let h = fromHoursAgo; h >= toHoursAgo; h -= every) {
    await delivery(endpointId, h + 1, "failed", [[h + 1, "retryable"], [h, "terminal"]], shape);
  }
}

// Succeeded an hour ago, after failing for 60 hours before that.
const steady = await endpoint("steady");
await failures(steady, 62, 2, 6);
await delivery(steady, 1, "delivered", [[1, "success"]]);
// Its last success 100 hours ago (before the window), failing since 60 hours ago, a delivery ending failed now.
const failing = await endpoint("failing");
await delivery(failing, 100, "delivered", [[100, "success"]]);
await failures(failing, 60, 0.1, 6);
// The same across the upgrade: ids of the older shape before it (their rows and attempts in the legacy partition), of the new after.
const legacy = await endpoint("legacy");
await delivery(legacy, 100, "delivered", [[100, "success"]], "legacy");
await failures(legacy, 60, 50, 6, "legacy");
await failures(legacy, 6, 0.1, 6);
// Failing for 30 hours only: less than the period.
const young = await endpoint("young");
await failures(young, 30, 0.1, 6);
// Failing since 60 hours ago, but the deliveries that ended since the period passed ended with a lost
// attempt (the service's failure, not the endpoint's).
const lost = await endpoint("lost");
await failures(lost, 60, 40, 6);
await delivery(lost, 2, "failed", [[2, "unknown"]]);
// A success of a delivery retried an hour ago, though its newer deliveries fail.
const retried = await endpoint("retried");
await failures(retried, 60, 0.1, 6);
await delivery(retried, 12, "delivered", [[12, "retryable"], [1, "success"]]);

t.test("the rows are where the test means them to be", async (t) => {
  const where = await em().execute<{ partition: string; n: number }[]>(
    `select tableoid::regclass::text as partition, count(*)::int as n from webhook_attempts a where delivery_id like 'wd_old%' group by 1`,
  );
  t.same(where.map((w) => w.partition), ["webhook_attempts_legacy"], "attempts of older-shaped ids in the legacy partition");
  const days = await em().execute<{ n: number }[]>(`select count(distinct tableoid)::int as n from webhook_deliveries where endpoint_id = ?`, [failing]);
  t.ok(days[0]!.n >= 2, "the failing endpoint's deliveries in the legacy partition and in days");
});

t.test("disables the endpoints that failed for the whole period, in day and legacy partitions; leaves the others", async (t) => {
  const disabled = await autoDisableFailing(em(), after, span, 100, now);
  t.same(disabled.sort(), [failing, legacy].sort());
  const rows = await em().execute<{ id: string; status: string; last_error: string | null }[]>(`select id, status, last_error from webhook_endpoints order by id`);
  for (const r of rows) t.equal(r.status, [failing, legacy].includes(r.id) ? "disabled" : "enabled", r.id);
});

t.test("looks back over the period and the attempt span only: a failure before that, with nothing since, does not count", async (t) => {
  const quiet = await endpoint("quiet");
  await delivery(quiet, 200, "delivered", [[200, "success"]]);
  await failures(quiet, 150, 150, 6);
  await delivery(quiet, 0.2, "failed", [[0.2, "terminal"]]);
  t.same(await autoDisableFailing(em(), after, span, 100, now), [], "the failure 150 hours ago is past the 72 hours looked at");
  t.same(await autoDisableFailing(em(), after, 200 * 3600, 100, now), [quiet], "with a span that reaches it, it counts");
});
