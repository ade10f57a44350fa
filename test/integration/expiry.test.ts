// The scheduler expires intents past expires_at and records payment.expired.
import t from "tap";
import { call, idemKey, merchantWithKey, sampleIntent, startTestApp } from "../helpers/harness.ts";

const { app, base } = await startTestApp(t);
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
  let status = "pending";
  for (let i = 0; i < 50 && status === "pending"; i++) {
    await new Promise((r) => setTimeout(r, 200));
    status = (await call(base, "GET", `${path}/${due.body.data.public_id}`, { key: a.key })).body.data.status;
  }
  t.equal(status, "expired");
  t.equal((await call(base, "GET", `${path}/${fresh.body.data.public_id}`, { key: a.key })).body.data.status, "pending");
  t.equal((await call(base, "GET", `${path}/${cancelled.body.data.public_id}`, { key: a.key })).body.data.status, "cancelled");
  await new Promise((r) => setTimeout(r, 1500));
  const events = await app.db.em
    .fork()
    .execute<{ type: string; payload: string }[]>("select type, payload from webhook_events where payment_intent_id = ? order by created_at", [due.body.data.public_id]);
  t.same(events.map((e) => e.type), ["payment.intent.created", "payment.expired"], "one expiry event");
  t.equal(JSON.parse(events[1]?.payload ?? "{}").data.payment_intent.status, "expired");
  const cancel = await call(base, "POST", `${path}/${due.body.data.public_id}/cancel`, { key: a.key });
  t.equal(cancel.body.error?.code, "invalid_state", "an expired intent cannot be cancelled");
});
