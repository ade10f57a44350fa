// Every delivery is made by one constructor (delivery/webhook-deliveries.ts pendingDeliveries) that
// records why (cause): an event's deliveries read `event` (recorded one at a time, in one statement
// with it, and in a batch), a replay `replay` with replay_of, an operator's recovery of missed events
// `recovery`; rows written without it (from before the column) read `event`, in a day made after
// the migration too. Real PostgreSQL, the functions the API and the scheduler call.
import t from "tap";
import { openDatabase } from "../../services/app/database.ts";
import { pendingDeliveries } from "../../services/delivery/webhook-deliveries.ts";
import { recordEvent, recordEvents } from "../../services/events/record.ts";
import { defaultEventRetentionSeconds } from "../../services/events/retention.ts";
import { newTimedId } from "../../services/platform/ids.ts";
import { ensurePartitions } from "../../services/retention/partitions.ts";
import { insertReplays } from "../../services/webhooks/deliveries.ts";
import { startRecovery } from "../../services/webhooks/recovery.ts";
import { createTestDatabase } from "../helpers/harness.ts";

const db = await openDatabase(await createTestDatabase(t));
t.teardown(() => db.close());
await db.migrator.up();
await ensurePartitions(db.em.fork());
const em = () => db.em.fork();

const hourAgo = new Date(Date.now() - 3_600_000);
await em().execute(`insert into merchants (id, name, created_at) values ('mer_cause', 'Cause', now())`);
for (const id of ["we_cause_a", "we_cause_b"]) {
  await em().execute(
    `insert into webhook_endpoints (id, merchant_id, environment, url, status, secret_ciphertext, created_at) values (?, 'mer_cause', 'test', 'https://hooks.example.test/x', 'enabled', '\\x00', ?)`,
    [id, hourAgo],
  );
}

const deliveries = (where: string, params: unknown[]) =>
  em().execute<{ id: string; endpoint_id: string; cause: string; replay_of: string | null; status: string; attempt_count: number }[]>(
    `select id, endpoint_id, cause, replay_of, status, attempt_count from webhook_deliveries where ${where} order by endpoint_id`,
    params,
  );

const data = { test: { synthetic: true } };

t.test("an event's deliveries, however recorded, read event", async (t) => {
  const one = await em().transactional((tx) => recordEvent(tx, { merchantId: "mer_cause", environment: "test", type: "payment.intent.created", data }));
  const made = await deliveries("event_id = ?", [one.id]);
  t.same(made.map((d) => [d.endpoint_id, d.cause, d.status, d.attempt_count, d.replay_of]), [
    ["we_cause_a", "event", "pending", 0, null],
    ["we_cause_b", "event", "pending", 0, null],
  ]);
  t.same(made.map((d) => d.id).sort(), [...one.deliveryIds].sort(), "the ids recordEvent returns");

  await em().transactional((tx) => recordEvents(tx, [{ merchantId: "mer_cause", environment: "test", type: "payment.confirmed", data }]));
  const batch = await em().execute<{ cause: string }[]>(
    `select d.cause from webhook_deliveries d join webhook_events e on e.id = d.event_id where e.type = 'payment.confirmed'`,
  );
  t.same(batch.map((d) => d.cause), ["event", "event"], "recordEvents' batch too");
});

t.test("a replay reads replay and names its original", async (t) => {
  const ev = await em().transactional((tx) => recordEvent(tx, { merchantId: "mer_cause", environment: "test", type: "payment.expired", data }));
  const original = ev.deliveryIds[0]!;
  const [replay] = await em().transactional((tx) => insertReplays(tx, [original], new Date(), defaultEventRetentionSeconds));
  const [row] = await deliveries("id = ?", [replay]);
  t.equal(row?.cause, "replay");
  t.equal(row?.replay_of, original);
  t.equal(row?.status, "pending");
});

t.test("an operator's recovery of missed events reads recovery", async (t) => {
  const ev = await em().transactional((tx) => recordEvent(tx, { merchantId: "mer_cause", environment: "test", type: "payment.cancelled", data }));
  // An endpoint that existed then but got none of it (disabled meanwhile, enabled again).
  await em().execute(
    `insert into webhook_endpoints (id, merchant_id, environment, url, status, secret_ciphertext, created_at) values ('we_cause_c', 'mer_cause', 'test', 'https://hooks.example.test/c', 'enabled', '\\x00', ?)`,
    [hourAgo],
  );
  const start = await em().transactional((tx) =>
    startRecovery(tx, "we_cause_c", new Date(hourAgo.getTime() - 1000), "test", { bounds: { maxDays: 30, maxEvents: 100, pageSize: 100 }, force: false }),
  );
  t.ok(start.enqueued >= 1, "it enqueues what the endpoint missed");
  const made = await deliveries("endpoint_id = 'we_cause_c'", []);
  t.ok(made.some((d) => d.id && d.cause === "recovery"), "the missed event's delivery");
  t.ok(made.every((d) => d.cause === "recovery" && d.replay_of === null), "every one of them reads recovery");
  t.ok((await deliveries("event_id = ? and endpoint_id = 'we_cause_c'", [ev.id])).length === 1);
});

t.test("a row written without a cause (from before the column), in a day made since, reads event", async (t) => {
  const at = new Date(Date.now() + 86_400_000);
  const eventId = newTimedId("evt", at);
  const id = newTimedId("wd", at);
  await em().execute(`insert into webhook_events (id, merchant_id, environment, type, payload, created_at) values (?, 'mer_cause', 'test', 'webhook.test', '{}', ?)`, [eventId, at]);
  await em().execute(
    `insert into webhook_deliveries (id, merchant_id, environment, event_id, endpoint_id, status, attempt_count, created_at, updated_at) values (?, 'mer_cause', 'test', ?, 'we_cause_a', 'pending', 0, ?, ?)`,
    [id, eventId, at, at],
  );
  t.equal((await deliveries("id = ?", [id]))[0]?.cause, "event");
});

t.test("replay_of goes with the cause replay, and only with it", async (t) => {
  const rows = { id: "?", merchantId: "?", environment: "?", eventId: "?", endpointId: "?", createdAt: "?", updatedAt: "?", from: "" };
  t.throws(() => pendingDeliveries("replay", rows), /replay_of goes with the cause replay/);
  t.throws(() => pendingDeliveries("recovery", { ...rows, replayOf: "?" }), /replay_of goes with the cause replay/);
  t.match(pendingDeliveries("event", rows), /'pending', 0, 'event'/);
});
