// The scheduler expires intents past expires_at and records payment.expired.
import t from "tap";
import { call, idemKey, merchantWithKey, sampleIntent, startTestApp, until } from "../helpers/harness.ts";

const { app, base, databaseUrl, masterKey } = await startTestApp(t);
const a = await merchantWithKey(app);
const path = `/api/v1/merchants/${a.merchant}/payment-intents`;

t.test("a pending intent past its expiry becomes expired, once", async (t) => {
  const due = await call(base, "POST", path, { key: a.key, idempotencyKey: idemKey(), body: { ...sampleIntent, expires_in_seconds: 60 } });
  const fresh = await call(base, "POST", path, { key: a.key, idempotencyKey: idemKey(), body: sampleIntent });
  const cancelled = await call(base, "POST", path, { key: a.key, idempotencyKey: idemKey(), body: { ...sampleIntent, expires_in_seconds: 60 } });
  await call(base, "POST", `${path}/${cancelled.body.data.public_id}/cancel`, { key: a.key });
  // Move the clock instead of waiting a minute: expiry is the database's comparison with now().
  await app.db.em.fork().execute("update payment_intents set expires_at = now() - interval '1 second' where id in (?, ?)", [
    due.body.data.public_id,
    cancelled.body.data.public_id,
  ]);
  const statusOf = async (id: string) => (await call(base, "GET", `${path}/${id}`, { key: a.key })).body.data.status as string;
  const status = await until("the due intent expired", async () => {
    const now = await statusOf(due.body.data.public_id);
    return now !== "pending" ? now : undefined;
  }, 10_000);
  t.equal(status, "expired");
  t.equal((await call(base, "GET", `${path}/${fresh.body.data.public_id}`, { key: a.key })).body.data.status, "pending");
  t.equal((await call(base, "GET", `${path}/${cancelled.body.data.public_id}`, { key: a.key })).body.data.status, "cancelled");
  // The sentinel: another intent made due only now, expired by a later pass of the scheduler; that
  // pass could have expired the first one a second time, and did not.
  await app.db.em.fork().execute("update payment_intents set expires_at = now() - interval '1 second' where id = ?", [fresh.body.data.public_id]);
  await until("a later scheduler pass", async () => (await statusOf(fresh.body.data.public_id)) === "expired", 10_000);
  const events = await app.db.em
    .fork()
    .execute<{ type: string; payload: string }[]>("select type, payload from webhook_events where payment_intent_id = ? order by created_at", [due.body.data.public_id]);
  t.same(events.map((e) => e.type), ["payment.intent.created", "payment.expired"], "one expiry event");
  t.equal(JSON.parse(events[1]?.payload ?? "{}").data.payment_intent.status, "expired");
  const cancel = await call(base, "POST", `${path}/${due.body.data.public_id}/cancel`, { key: a.key });
  t.equal(cancel.body.error?.code, "invalid_state", "an expired intent cannot be cancelled");
});

t.test("with three schedulers on one database every due intent expires once, never before expires_at", async (t) => {
  // Two more scheduler-only processes' worth of schedulers (apps) on the same database.
  for (let i = 0; i < 2; i++) await startTestApp(t, { DATABASE_URL: databaseUrl }, ["scheduler"], masterKey);
  const ids: string[] = [];
  for (let i = 0; i < 30; i++) {
    const res = await call(base, "POST", path, { key: a.key, idempotencyKey: idemKey(), body: { ...sampleIntent, expires_in_seconds: 60 } });
    ids.push(res.body.data.public_id);
  }
  const em = app.db.em.fork();
  await em.execute("update payment_intents set expires_at = now() + interval '1500 milliseconds' where id in (?)", [ids]);
  await until("all expired", async () => {
    const [row] = await em.execute<{ n: number }[]>("select count(*)::int as n from payment_intents where id in (?) and status = 'expired'", [ids]);
    return row?.n === ids.length;
  }, 10_000);
  const events = await em.execute<{ payment_intent_id: string; n: number }[]>(
    "select payment_intent_id, count(*)::int as n from webhook_events where payment_intent_id in (?) and type = 'payment.expired' group by payment_intent_id",
    [ids],
  );
  t.equal(events.length, ids.length, "every intent has a payment.expired event");
  t.ok(events.every((e) => e.n === 1), "exactly one each");
  const [lag] = await em.execute<{ max: number }[]>(
    "select max(extract(epoch from expired_at - expires_at))::float as max from payment_intents where id in (?)",
    [ids],
  );
  // How soon after expires_at is a figure (the schedulers poll every second), not a pass/fail bound.
  t.comment(`largest lag from expires_at to expired_at: ${lag?.max} s`);
  t.ok((lag?.max ?? -1) >= 0, "expired at or after expires_at, never before");
});
