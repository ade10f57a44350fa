// An event and its deliveries are kept, and answer, together (issue 61; docs/webhooks.md,
// "Retention"): past EVENT_RETENTION, a replay still retrying keeps its event and every delivery of
// it (GET the event, the deliveries list unfiltered and by ?event_id=, the retention job's run);
// once it ends all of them are gone alike. A replay of an event past retention is refused (409
// invalid_state) and changes nothing, from the route and from an operator's recovery alike, so no
// one can keep an event, and its day, alive forever. Real PostgreSQL, NATS, HTTP and workers; rows
// are aged in the database, as time would age them (this app runs no scheduler: the job's runs are
// the test's own).
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import t from "tap";
import { AdminService } from "../../gen/payments/v1/admin_pb.ts";
import { createInternalCredential } from "../../services/auth/admin.ts";
import { loadConfig } from "../../services/platform/config.ts";
import { removePastRetention } from "../../services/retention/job.ts";
import { call, idemKey, merchantWithKey, sampleIntent, until, type Credentials } from "../helpers/harness.ts";
import { webhookSetup } from "../helpers/webhooks.ts";

const retentionEnv = {
  EVENT_RETENTION: "60s",
  // A failed attempt's retry waits 30 s: a replay to an endpoint that is down stays pending (a retry
  // waiting) for as long as a test looks at it, and is ended by disabling its endpoint.
  WEBHOOK_RETRY_DELAYS: "30,30,30,30,30",
};
const down = new Set<string>();
const s = await webhookSetup(t, {
  env: retentionEnv,
  roles: ["rpc", "gateway", "worker"],
  respond: (req) => ([...down].some((path) => req.url.startsWith(path)) ? { status: 503 } : { status: 200 }),
});
const settings = loadConfig(retentionEnv).retention;
const em = () => s.app.db.em.fork();

interface Delivery {
  id: string;
  event_id: string;
  status: string;
  replay_of?: string | null;
}

const api = (c: Credentials) => {
  const path = `/api/v1/merchants/${c.merchant}`;
  return {
    getEvent: (eventId: string) => call(s.base, "GET", `${path}/webhook-events/${eventId}`, { key: c.key }),
    list: async (query = ""): Promise<Delivery[]> => {
      const res = await call(s.base, "GET", `${path}/webhook-deliveries?limit=200${query}`, { key: c.key });
      if (res.status !== 200) throw new Error(`list: ${res.status} ${JSON.stringify(res.body)}`);
      return res.body.data as Delivery[];
    },
    replay: (deliveryId: string, key = idemKey()) => call(s.base, "POST", `${path}/webhook-deliveries/${deliveryId}/replay`, { key: c.key, idempotencyKey: key }),
    disable: (endpointId: string) => call(s.base, "POST", `${path}/webhook-endpoints/${endpointId}/disable`, { key: c.key }),
    createIntent: () => call(s.base, "POST", `${path}/payment-intents`, { key: c.key, idempotencyKey: idemKey(), body: sampleIntent }),
    test: (endpointId: string) => call(s.base, "POST", `${path}/webhook-endpoints/${endpointId}/test`, { key: c.key }),
  };
};

const rowOf = async (deliveryId: string) =>
  (await em().execute<{ status: string; attempt_count: number; next_attempt_at: Date | null }[]>(`select status, attempt_count, next_attempt_at from webhook_deliveries where id = ?`, [deliveryId]))[0];
const deliveriesOfEvent = async (eventId: string) =>
  (await em().execute<{ id: string; status: string; replay_of: string | null }[]>(`select id, status, replay_of from webhook_deliveries where event_id = ? order by id`, [eventId]));
const eventRows = async (eventId: string) => (await em().execute<{ n: number }[]>(`select count(*)::int as n from webhook_events where id = ?`, [eventId]))[0]?.n;

/** Ages the event and the deliveries named by `seconds`, as time would. */
async function age(eventId: string, deliveryIds: readonly string[], seconds: number) {
  await em().execute(`update webhook_events set created_at = created_at - make_interval(secs => ?) where id = ?`, [seconds, eventId]);
  for (const id of deliveryIds) await em().execute(`update webhook_deliveries set created_at = created_at - make_interval(secs => ?) where id = ?`, [seconds, id]);
}

/** A replay of `deliveryId` to an endpoint that is down: made, attempted once and failed, and waiting (pending) on its 30 s retry. */
async function retryingReplay(c: Credentials, deliveryId: string): Promise<string> {
  const res = await api(c).replay(deliveryId);
  if (res.status !== 200) throw new Error(`replay: ${res.status} ${JSON.stringify(res.body)}`);
  const id = res.body.data.id as string;
  await until("the replay's first attempt failed and its retry waits", async () => {
    const row = await rowOf(id);
    return row !== undefined && row.status === "pending" && row.attempt_count >= 1;
  }, 20_000);
  return id;
}

/** The retention job's run, as the scheduler would make it now. */
const runJob = () => removePastRetention(em(), settings, async () => undefined);

const sorted = (ids: readonly string[]) => [...ids].sort();

t.test("past retention, a replay still retrying keeps its event and every delivery of it, answering as before; once it ends, all are gone alike", async (t) => {
  const c = await merchantWithKey(s.app);
  const a = api(c);
  const upEndpoint = await s.createEndpoint("/kept/up", c);
  const downEndpoint = await s.createEndpoint("/kept/down", c);

  // One event, a delivery to each endpoint, both delivered.
  const created = await a.createIntent();
  t.equal(created.status, 200, JSON.stringify(created.body));
  const eventId = await until("the intent's event and its two deliveries are delivered", async () => {
    const rows = await em().execute<{ event_id: string; status: string }[]>(
      `select d.event_id, d.status from webhook_deliveries d where d.merchant_id = ? and d.endpoint_id in (?, ?)`,
      [c.merchant, upEndpoint.id, downEndpoint.id],
    );
    return rows.length === 2 && rows.every((r) => r.status === "delivered" && r.event_id === rows[0]!.event_id) ? rows[0]!.event_id : undefined;
  }, 20_000);
  const byEndpoint = async (endpointId: string) =>
    (await em().execute<{ id: string }[]>(`select id from webhook_deliveries where event_id = ? and endpoint_id = ?`, [eventId, endpointId]))[0]!.id;
  const toUp = await byEndpoint(upEndpoint.id);
  const toDown = await byEndpoint(downEndpoint.id);

  // The down endpoint stops answering; a replay of its delivery, made within retention, retries.
  down.add("/kept/down");
  const replay = await retryingReplay(c, toDown);
  // The event and its first two deliveries pass retention; the replay was made just within it.
  await age(eventId, [toUp, toDown], 61);

  const all = sorted([toUp, toDown, replay]);
  t.equal((await a.getEvent(eventId)).status, 200, "the event answers: a delivery of it has not ended");
  t.same(sorted((await a.list(`&event_id=${eventId}`)).map((d) => d.id)), all, "?event_id= lists every delivery of it, the delivered ones too");
  const unfiltered = (await a.list()).filter((d) => d.event_id === eventId);
  t.same(sorted(unfiltered.map((d) => d.id)), all, "and so does the unfiltered list");
  t.same(
    unfiltered.map((d) => d.status).sort(),
    ["delivered", "delivered", "pending"],
    "as they are: two delivered, the replay pending",
  );
  t.same((await a.list(`&endpoint_id=${upEndpoint.id}`)).map((d) => d.id), [toUp], "by ?endpoint_id= too");
  t.same((await a.list(`&status=delivered&event_id=${eventId}`)).length, 2, "and by ?status=");

  // The retention job keeps them too: what answers is what is stored.
  await runJob();
  t.equal(await eventRows(eventId), 1, "the job keeps the event");
  t.same(sorted((await deliveriesOfEvent(eventId)).map((d) => d.id)), all, "and every delivery of it");
  t.same(sorted((await a.list(`&event_id=${eventId}`)).map((d) => d.id)), all, "which still answer after the job's run");

  // The replay ends (its endpoint disabled): the event and all its deliveries are gone at once.
  t.equal((await a.disable(downEndpoint.id)).status, 200);
  t.equal((await rowOf(replay))?.status, "failed", "the replay ended");
  const gone = await a.getEvent(eventId);
  t.equal(gone.status, 404, "the event is past retention with nothing under way: 404");
  t.equal(gone.body.error?.code, "not_found");
  t.same(await a.list(`&event_id=${eventId}`), [], "none of its deliveries is listed by ?event_id=");
  t.same((await a.list()).filter((d) => d.event_id === eventId), [], "nor in the unfiltered list");
  for (const id of all) {
    const r = await a.replay(id);
    t.equal(r.status, 404, `replaying ${id === replay ? "the replay" : "a delivery"} is 404, as reading it`);
    t.equal(r.body.error?.code, "not_found");
  }

  await runJob();
  t.equal(await eventRows(eventId), 0, "the job's next run removes the event");
  t.same(await deliveriesOfEvent(eventId), [], "with all its deliveries");
});

t.test("a replay of an event past retention is refused with 409 invalid_state and changes nothing, whichever of its deliveries is asked", async (t) => {
  const c = await merchantWithKey(s.app);
  const a = api(c);
  const endpoint = await s.createEndpoint("/refused", c);
  const sent = await a.test(endpoint.id);
  t.equal(sent.status, 200, JSON.stringify(sent.body));
  const original = sent.body.data.id as string;
  const eventId = sent.body.data.event_id as string;
  await until("delivered", async () => (await rowOf(original))?.status === "delivered", 20_000);
  down.add("/refused");
  const replay = await retryingReplay(c, original);
  await age(eventId, [original], 61);

  const before = await deliveriesOfEvent(eventId);
  const replayRow = await rowOf(replay);
  for (const [what, id] of [["the delivered original", original], ["the replay still retrying", replay]] as const) {
    const res = await a.replay(id);
    t.equal(res.status, 409, `${what}: ${res.status} ${JSON.stringify(res.body)}`);
    t.equal(res.body.error?.code, "invalid_state", "the documented envelope's code");
    t.equal(res.body.error?.param, "delivery_id");
    t.match(res.body.error?.message, new RegExp(`${eventId} is past its retention \\(EVENT_RETENTION\\).*can no longer be replayed`), "saying why");
  }
  t.same(await deliveriesOfEvent(eventId), before, "no delivery was added");
  t.same(await rowOf(replay), replayRow, "and the one still retrying is as it was");
  t.equal((await a.getEvent(eventId)).status, 200, "the event still answers while its replay retries");

  // The same Idempotency-Key again is the same refusal, never a delivery.
  const key = idemKey();
  t.equal((await a.replay(original, key)).status, 409);
  t.equal((await a.replay(original, key)).status, 409, "asked again with the same key");
  t.same(await deliveriesOfEvent(eventId), before, "still nothing added");

  t.equal((await a.disable(endpoint.id)).status, 200);
  t.equal((await a.getEvent(eventId)).status, 404, "once the replay ends, the event is gone: nothing kept it alive");
});

t.test("an operator's recovery does not replay a failed delivery of an event past retention", async (t) => {
  const c = await merchantWithKey(s.app);
  const a = api(c);
  const endpoint = await s.createEndpoint("/recovered", c);
  const sent = await a.test(endpoint.id);
  const original = sent.body.data.id as string;
  const eventId = sent.body.data.event_id as string;
  await until("delivered", async () => (await rowOf(original))?.status === "delivered", 20_000);
  down.add("/recovered");
  // A replay made within retention that failed (as after its last attempt), recent itself, of an event now past retention.
  const replay = await retryingReplay(c, original);
  await em().execute(`update webhook_deliveries set status = 'failed', next_attempt_at = null where id = ?`, [replay]);
  await age(eventId, [original], 61);
  down.delete("/recovered");

  const { credential } = await createInternalCredential(em(), "retention test", ["admin"], "test");
  const admin = createClient(AdminService, createGrpcTransport({ baseUrl: s.rpcUrl }));
  const res = await admin.recoverFailedDeliveries({ endpointId: endpoint.id, since: timestampFromDate(new Date(0)) }, { headers: { authorization: `Bearer ${credential}` } });
  t.equal(res.recovered, 0, `nothing recovered (${JSON.stringify(res.deliveryIds)})`);
  t.same((await deliveriesOfEvent(eventId)).map((d) => d.id).sort(), sorted([original, replay]), "no delivery added to the old event");
  t.equal((await a.getEvent(eventId)).status, 404, "which is gone: its last delivery ended");
});
