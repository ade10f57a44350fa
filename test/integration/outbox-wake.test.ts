// A create in a process that runs a relay wakes that relay itself once it has committed, and sends
// no NOTIFY: PostgreSQL serialises every notifying commit, which held creates with webhooks to one
// WAL flush each (services/delivery/outbox-wake.ts). Its webhook still comes at once; any other
// transaction that records deliveries still wakes every relay by NOTIFY, as before. Real
// PostgreSQL, NATS and HTTPS receiver.
import pg from "pg";
import t from "tap";
import { call, until } from "../helpers/harness.ts";
import { createIntents, eventsOnce, webhookSetup } from "../helpers/webhooks.ts";

const s = await webhookSetup(t);
const endpoint = await s.createEndpoint();
const listener = new pg.Client({ connectionString: s.databaseUrl });
await listener.connect();
t.teardown(() => listener.end());
const heard: string[] = [];
listener.on("notification", (n) => heard.push(n.payload ?? ""));
await listener.query("listen webhook_outbox");
const arrived = (intent: string) => eventsOnce(s.receiver, endpoint.secret).some((e) => e.data.payment_intent?.public_id === intent);

t.test("the relay's own process creates without a NOTIFY, and the webhooks come at once", async (t) => {
  // The merchant's first create may allocate its address in a transaction of its own (and notify).
  const [first] = await createIntents(s, 1);
  await until("the first create's webhook", async () => arrived(first!), 15_000);
  // A mark in the channel: whatever comes after it was sent after the creates before it.
  await listener.query("select pg_notify('webhook_outbox', 'mark')");
  await until("the mark heard", async () => heard.includes("mark"), 10_000);
  const ids = await createIntents(s, 5, 1);
  await until("the five webhooks", async () => ids.every(arrived), 15_000);
  // The sentinel: a test event is recorded in a transaction of its own, which notifies.
  const sent = await call(s.base, "POST", `/api/v1/merchants/${s.creds.merchant}/webhook-endpoints/${endpoint.id}/test`, { key: s.creds.key });
  t.equal(sent.status, 200, JSON.stringify(sent.body));
  await until("the test event's webhook", async () => eventsOnce(s.receiver, endpoint.secret).some((e) => e.type === "webhook.test"), 15_000);
  await until("the test event's NOTIFY heard", async () => heard.length > heard.indexOf("mark") + 1, 10_000);
  t.same(heard.slice(heard.indexOf("mark") + 1), [""], "one NOTIFY after the mark: the test event's; none of the five creates'");
});
