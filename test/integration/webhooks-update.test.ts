// An endpoint's event types and description changed in place (issue 64): by the API
// (POST …/webhook-endpoints/{id}) and from the dashboard's endpoint page. The new list applies to
// events recorded from then on; deliveries already made stay. Real service, PostgreSQL, NATS and
// receiver.
import t from "tap";
import { call, idemKey, merchantWithKey, sampleIntent, until } from "../helpers/harness.ts";
import { dashboardClient } from "../helpers/dashboard.ts";
import { eventsOnce, hookHost, webhookSetup } from "../helpers/webhooks.ts";

const s = await webhookSetup(t, { roles: ["rpc", "gateway", "worker"], env: { DASHBOARD_BASE_URL: "http://127.0.0.1/dashboard", DASHBOARD_SIGN_IN_RATE_LIMIT_PER_MINUTE: "1000" } });
const endpoints = `/api/v1/merchants/${s.creds.merchant}/webhook-endpoints`;
const createIntent = async () => {
  const res = await call(s.base, "POST", `/api/v1/merchants/${s.creds.merchant}/payment-intents`, { key: s.creds.key, idempotencyKey: idemKey(), body: sampleIntent });
  return res.body.data.public_id as string;
};
const deliveriesOf = async (endpointId: string) =>
  (await s.app.db.em.fork().execute<{ type: string; payment_intent_id: string }[]>(`select e.type, e.payment_intent_id from webhook_deliveries d join webhook_events e on e.id = d.event_id where d.endpoint_id = ?`, [endpointId]));

t.test("by the API: the new list for events from then on; a blank description clears it; another merchant's is not found", async (t) => {
  const made = await call(s.base, "POST", endpoints, { key: s.creds.key, body: { url: `https://${hookHost}/update`, description: "orders", enabled_events: ["payment.confirmed"] } });
  const id = made.body.data.id as string;
  await createIntent();
  t.same(await deliveriesOf(id), [], "payment.intent.created is not among its types: no delivery (made with the event, in its transaction)");

  const updated = await call(s.base, "POST", `${endpoints}/${id}`, { key: s.creds.key, body: { enabled_events: ["payment.intent.created", "payment.confirmed"] } });
  t.equal(updated.status, 200);
  t.match(updated.body.data, { id, enabled_events: ["payment.intent.created", "payment.confirmed"], description: "orders", url: `https://${hookHost}/update` }, "the list changed, the rest as it was");
  const after = await createIntent();
  await until("the new intent's event at the endpoint", async () => eventsOnce(s.receiver, made.body.data.signing_secret, "/update").some((e) => e.data.payment_intent?.public_id === after), 20_000);
  t.same((await deliveriesOf(id)).map((d) => d.payment_intent_id), [after], "only the event recorded after the change: the earlier one got none");

  const cleared = await call(s.base, "POST", `${endpoints}/${id}`, { key: s.creds.key, body: { description: "  " } });
  t.equal(cleared.body.data.description, null, "a blank description clears it");
  t.same(cleared.body.data.enabled_events, ["payment.intent.created", "payment.confirmed"], "events not sent: unchanged");
  t.same((await call(s.base, "POST", `${endpoints}/${id}`, { key: s.creds.key, body: { enabled_events: ["*"] } })).body.data.enabled_events, ["*"]);
  t.equal((await call(s.base, "POST", `${endpoints}/${id}`, { key: s.creds.key, body: { enabled_events: ["payment.sideways"] } })).body.error.param, "enabled_events");
  t.equal((await call(s.base, "POST", `${endpoints}/${id}`, { key: s.creds.key, body: { url: "https://elsewhere.example/x" } })).body.error.param, "url", "the URL is not changed here");
  const other = await merchantWithKey(s.app);
  t.equal((await call(s.base, "POST", `/api/v1/merchants/${other.merchant}/webhook-endpoints/${id}`, { key: other.key, body: { description: "mine" } })).status, 404, "another merchant's endpoint");
  t.equal((await call(s.base, "GET", `${endpoints}/${id}`, { key: s.creds.key })).body.data.description, null, "and unchanged by it");
});

t.test("from the dashboard: the endpoint page's form shows the list and saves a new one", async (t) => {
  const made = await call(s.base, "POST", endpoints, { key: s.creds.key, body: { url: `https://${hookHost}/dash`, enabled_events: ["payment.confirmed"] } });
  const id = made.body.data.id as string;
  const c = dashboardClient(s.base);
  await c.signIn(s.creds.key);
  const page = (await c.get(`/dashboard/webhooks/${id}`)).body;
  t.match(page, /<input type="checkbox" name="events" value="payment\.confirmed" checked/, "its list ticked");
  t.notMatch(page, /value="\*" checked/, "not every type");
  const saved = await c.post(`/dashboard/webhooks/${id}/update`, { description: "from the dashboard", events: ["payment.confirmed", "payment.exception"] }, { from: `/dashboard/webhooks/${id}` });
  t.equal(saved.status, 303);
  t.match(saved.headers.get("location"), /done=updated/);
  const now = await call(s.base, "GET", `${endpoints}/${id}`, { key: s.creds.key });
  t.same(now.body.data.enabled_events, ["payment.confirmed", "payment.exception"]);
  t.equal(now.body.data.description, "from the dashboard");
  const none = await c.post(`/dashboard/webhooks/${id}/update`, { description: "x" }, { from: `/dashboard/webhooks/${id}` });
  t.equal(none.status, 400, "no type ticked: refused, nothing changed");
  t.equal((await call(s.base, "GET", `${endpoints}/${id}`, { key: s.creds.key })).body.data.description, "from the dashboard");
});
