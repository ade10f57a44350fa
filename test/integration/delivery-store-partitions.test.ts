// The delivery pipeline's writes (services/delivery/webhook-deliveries.ts) find a delivery by id in the webhook
// tables partitioned by day (issue 50), whether its id carries its day (as the service makes them)
// or is of the shape made before the upgrade (its row in the legacy partition): each statement
// changes the one delivery it names, and an attempt goes to its delivery's day.
import t from "tap";
import { openDatabase } from "../../services/app/database.ts";
import { claimDeliveries, failClaimed, finishAttempts, giveUpAttempt, recordLostAttempt, requeue, requeueHeldBack, takeUnpublished } from "../../services/delivery/webhook-deliveries.ts";
import { newTimedId } from "../../services/platform/ids.ts";
import { ensurePartitions, listPartitions, partitionName } from "../../services/retention/partitions.ts";
import { createTestDatabase } from "../helpers/harness.ts";

const db = await openDatabase(await createTestDatabase(t));
t.teardown(() => db.close());
await db.migrator.up();
await ensurePartitions(db.em.fork());
const em = () => db.em.fork();
const day = 86_400_000;
const cutover = (await listPartitions(em())).find((p) => p.table === "webhook_deliveries" && p.from === undefined)!.to;

await em().execute(`insert into merchants (id, name, created_at) values ('mer_store', 'Store', now())`);
await em().execute(`insert into webhook_endpoints (id, merchant_id, environment, url, status, secret_ciphertext, created_at) values ('we_store', 'mer_store', 'test', 'https://hooks.example.test/x', 'enabled', '\\x00', now())`);

let n = 0;
/** A pending delivery (and its event) of the given shape; `published`: as the relay leaves it. */
async function delivery(kind: "day" | "legacy", published = true): Promise<{ id: string; at: Date }> {
  n++;
  const at = kind === "day" ? new Date(cutover.getTime() + day + n * 1000) : new Date(Date.now() - n * 1000);
  const eventId = kind === "day" ? newTimedId("evt", at) : `evt_old${n}`;
  const id = kind === "day" ? newTimedId("wd", at) : `wd_old${n}`;
  await em().execute(`insert into webhook_events (id, merchant_id, environment, type, payload, created_at) values (?, 'mer_store', 'test', 'webhook.test', '{}', ?)`, [eventId, at]);
  await em().execute(
    `insert into webhook_deliveries (id, merchant_id, environment, event_id, endpoint_id, status, attempt_count, published_at, created_at, updated_at)
     values (?, 'mer_store', 'test', ?, 'we_store', 'pending', 0, ?, ?, ?)`,
    [id, eventId, published ? at : null, at, at],
  );
  return { id, at };
}
/** An unpublished delivery dated `at`, as a writer whose clock reads `at` records it. */
async function unpublishedAt(at: Date): Promise<string> {
  const id = newTimedId("wd", at);
  await em().execute(
    `insert into webhook_deliveries (id, merchant_id, environment, event_id, endpoint_id, status, attempt_count, created_at, updated_at)
     values (?, 'mer_store', 'test', ?, 'we_store', 'pending', 0, ?, ?)`,
    [id, newTimedId("evt", at), at, at],
  );
  return id;
}
const row = async (id: string) =>
  (await em().execute<{ status: string; attempt_count: number; published_at: Date | null; last_error: string | null; tableoid: string }[]>(
    `select status, attempt_count, published_at, last_error, tableoid::regclass::text as tableoid from webhook_deliveries where id = ?`,
    [id],
  ))[0];
const attempts = async (id: string) =>
  em().execute<{ number: number; outcome: string; error: string | null; tableoid: string }[]>(
    `select number, outcome, error, tableoid::regclass::text as tableoid from webhook_attempts where delivery_id = ? order by number`,
    [id],
  );

for (const kind of ["day", "legacy"] as const) {
  t.test(`a delivery ${kind === "day" ? "in a day's partition (an id with its day)" : "in the legacy partition (an id of the older shape)"}`, async (t) => {
    const partition = (table: string, at: Date) => (kind === "day" ? partitionName(table, new Date(Math.floor(at.getTime() / day) * day)) : `${table}_legacy`);

    const fresh = await delivery(kind, false);
    const taken = await takeUnpublished(em(), 1000);
    t.ok(taken.some((x) => x.id === fresh.id), "the relay takes it");
    t.ok((await row(fresh.id))?.published_at, "and marks it published");
    t.equal((await row(fresh.id))?.tableoid, partition("webhook_deliveries", fresh.at), "in its partition");

    const d = await delivery(kind);
    const [claim] = await claimDeliveries(em(), [{ id: d.id, seq: 7 }], new Date(), 60_000);
    t.ok(claim && "claimed" in claim, "the worker claims it");
    t.match(await row(d.id), { status: "processing", attempt_count: 1 });
    const [written] = await finishAttempts(em(), [
      { deliveryId: d.id, number: 1, startedAt: new Date(), durationMs: 5, statusCode: 500, error: undefined, outcome: "retryable", excerpt: undefined, status: "pending", nextAttemptAt: new Date(Date.now() + 60_000), lastError: "http_500" },
    ]);
    t.equal(written, true, "its attempt is finished");
    t.match(await row(d.id), { status: "pending", last_error: "http_500" });
    t.same(await attempts(d.id), [{ number: 1, outcome: "retryable", error: null, tableoid: partition("webhook_attempts", d.at) }], "the attempt is in its delivery's day");

    t.equal(await requeue(em(), d.id), true, "requeue puts it back in the outbox");
    t.equal((await row(d.id))?.published_at, null);
    const again = await delivery(kind);
    t.same(await requeueHeldBack(em(), [{ id: again.id, seq: 1, waitMs: 0 }]), [true], "one held back goes back too");

    const second = await claimDeliveries(em(), [{ id: d.id, seq: 8 }], new Date(Date.now() + 120_000), 60_000);
    t.ok(second[0] && "claimed" in second[0], "claimed again");
    t.equal(await giveUpAttempt(em(), d.id, 2, new Date(), false, 1000), true, "a stopping worker gives up its attempt");
    t.match(await row(d.id), { status: "pending", last_error: "worker_lost" });
    t.same((await attempts(d.id)).map((a) => [a.number, a.outcome, a.error]), [[1, "retryable", null], [2, "unknown", "worker_lost"]], "recorded as lost");
    await recordLostAttempt(em(), d.id, 2, new Date());
    t.equal((await attempts(d.id)).length, 2, "recording it lost again changes nothing");

    const third = await claimDeliveries(em(), [{ id: d.id, seq: 9 }], new Date(Date.now() + 240_000), 60_000);
    t.ok(third[0] && "claimed" in third[0]);
    t.equal(await giveUpAttempt(em(), d.id, 3, new Date(), true, 1000), true, "given up on its last attempt");
    t.match(await row(d.id), { status: "failed", last_error: "worker_lost" });

    const disabled = await delivery(kind);
    await claimDeliveries(em(), [{ id: disabled.id, seq: 3 }], new Date(), 60_000);
    await failClaimed(em(), disabled.id, "endpoint_disabled");
    t.match(await row(disabled.id), { status: "failed", last_error: "endpoint_disabled" }, "a claim whose endpoint was disabled ends");
  });
}

t.test("a claim reads each delivery's own event, whether its messages name their events (in the claim's statement), name another, or none", async (t) => {
  const made = await Promise.all([delivery("day"), delivery("day"), delivery("legacy"), delivery("day"), delivery("day")]);
  const rows = await em().execute<{ id: string; event_id: string }[]>(`select id, event_id from webhook_deliveries where id in (?)`, [made.map((d) => d.id)]);
  const events = made.map((d) => rows.find((r) => r.id === d.id)!.event_id);
  for (const [i, e] of events.entries()) await em().execute(`update webhook_events set payload = ? where id = ?`, [JSON.stringify({ n: i }), e]);
  // The claim's own statement is prepared (it goes to the pool directly); a second read of the
  // events goes through the entity manager's execute, counted here.
  let secondReads = 0;
  const claim = async (batch: { i: number; eventId: string | undefined }[]) => {
    const counted = em();
    const execute = counted.execute.bind(counted);
    counted.execute = ((...args: Parameters<typeof execute>) => {
      secondReads++;
      return execute(...args);
    }) as typeof execute;
    secondReads = 0;
    const results = await claimDeliveries(counted, batch.map(({ i, eventId }) => ({ id: made[i]!.id, seq: 100 + i, eventId })), new Date(), 60_000);
    return [results.map((r) => ("claimed" in r ? (JSON.parse(r.claimed.payload) as { n: number }).n : r)), secondReads];
  };
  t.same(await claim([0, 1, 2].map((i) => ({ i, eventId: events[i] }))), [[0, 1, 2], 0], "named, a day's and a legacy one: each its own event, read in the claim's statement");
  // Another day's event, as a message could only name it by a fault: the claim still reads the delivery's own.
  t.same(await claim([{ i: 3, eventId: newTimedId("evt", new Date(Date.now() - 5 * day)) }]), [[3], 1], "named another: its own event, in a second read");
  t.same(await claim([{ i: 4, eventId: undefined }]), [[4], 1], "named none (published before messages named their events): its own event, in a second read");
});

t.test("the relay's pass over recent days leaves an older unpublished delivery to its pass over every day", async (t) => {
  const id = await unpublishedAt(new Date(Date.now() - 5 * day));
  const recent = await delivery("day", false);
  const taken = await takeUnpublished(em(), 1000, new Date(Date.now() - 3 * day));
  t.ok(taken.some((x) => x.id === recent.id), "the recent one is taken");
  t.notOk(taken.some((x) => x.id === id), "the one made 5 days ago is not");
  t.equal((await row(id))?.published_at, null, "and stays unpublished");
  const everyDay = await takeUnpublished(em(), 1000);
  t.same(everyDay.map((x) => x.id), [id], "the pass over every day takes it");
  t.ok((await row(id))?.published_at, "and marks it published");
});

t.test("the newest lane takes what a writer dated up to an hour past the relay's clock, and leaves one dated later to the other lanes", async (t) => {
  await ensurePartitions(em(), new Date(Date.now() + 2 * day));
  const now = await unpublishedAt(new Date());
  const ahead = await unpublishedAt(new Date(Date.now() + 50 * 60_000));
  const later = await unpublishedAt(new Date(Date.now() + 2 * day));
  const since = new Date(Date.now() - 3 * day);
  const ours = (taken: { id: string }[]) => taken.map((x) => x.id).filter((id) => [now, ahead, later].includes(id));
  const newest = await takeUnpublished(em(), 1000, since, "newest");
  t.same(ours(newest), [now, ahead], "the newest lane takes the one made now and the one dated 50 minutes ahead, oldest first");
  t.equal((await row(later))?.published_at, null, "not the one dated two days ahead");
  const rest = await takeUnpublished(em(), 1000, since, "rest");
  t.same(ours(rest), [later], "which the other lanes' pass takes");
  t.ok((await row(later))?.published_at, "and marks published");
});
