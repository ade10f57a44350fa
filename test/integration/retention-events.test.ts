// EVENT_RETENTION (issue 50): an event older than the retention answers 404 and its deliveries
// leave the list (and cannot be replayed) at once, whatever the retention job has removed yet
// (this app runs no scheduler role); a delivery still retrying, of an event of the same age, is
// kept with its event until it ends, then goes the same way. Rows are aged in the database, as
// time would age them.
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import t from "tap";
import { AdminService } from "../../gen/payments/v1/admin_pb.ts";
import { createInternalCredential } from "../../services/auth/admin.ts";
import { call, idemKey, until } from "../helpers/harness.ts";
import { webhookSetup } from "../helpers/webhooks.ts";

let failing = true;
const s = await webhookSetup(t, {
  env: { EVENT_RETENTION: "60s", WEBHOOK_RETRY_DELAYS: "1,1,1,1,1,1,1,1,1,1", WEBHOOK_MAX_ATTEMPTS: "11" },
  roles: ["rpc", "gateway", "worker"],
  respond: (req) => (req.url.startsWith("/failing") && failing ? { status: 500 } : { status: 200 }),
});
const { base, creds: c } = s;
const em = () => s.app.db.em.fork();
const ok = await s.createEndpoint("/ok");
const flaky = await s.createEndpoint("/failing");
const merchantPath = `/api/v1/merchants/${c.merchant}`;

const sendTest = async (endpointId: string) => {
  const res = await call(base, "POST", `${merchantPath}/webhook-endpoints/${endpointId}/test`, { key: c.key });
  if (res.status !== 200) throw new Error(`test event: ${res.status} ${JSON.stringify(res.body)}`);
  return { deliveryId: res.body.data.id as string, eventId: res.body.data.event_id as string };
};
const statusOf = async (deliveryId: string) => (await em().execute<{ status: string; attempt_count: number }[]>(`select status, attempt_count from webhook_deliveries where id = ?`, [deliveryId]))[0];
/** Ages an event and its deliveries by `seconds`, as time would. */
const age = async (eventId: string, seconds: number) => {
  await em().execute(`update webhook_events set created_at = created_at - make_interval(secs => ?) where id = ?`, [seconds, eventId]);
  await em().execute(`update webhook_deliveries set created_at = created_at - make_interval(secs => ?) where event_id = ?`, [seconds, eventId]);
};
const getEvent = (eventId: string) => call(base, "GET", `${merchantPath}/webhook-events/${eventId}`, { key: c.key });
const listed = async (query = "") => {
  const res = await call(base, "GET", `${merchantPath}/webhook-deliveries?limit=100${query}`, { key: c.key });
  return (res.body.data as { id: string }[]).map((d) => d.id);
};

/** Two webhook.test deliveries to the failing endpoint, each after a failed attempt, then ended failed (as after their last attempt). */
async function twoFailed() {
  failing = true;
  const both = [await sendTest(flaky.id), await sendTest(flaky.id)] as const;
  for (const d of both) await until("a failed attempt", async () => ((await statusOf(d.deliveryId))?.attempt_count ?? 0) >= 1, 20_000);
  await em().execute(`update webhook_deliveries set status = 'failed', next_attempt_at = null where id in (?, ?)`, [both[0].deliveryId, both[1].deliveryId]);
  failing = false;
  return both;
}

/** An operator's AdminService.RecoverFailedDeliveries for the failing endpoint, from `since`. */
async function recover(since: Date) {
  const { credential } = await createInternalCredential(em(), "retention test", ["admin"], "test");
  const admin = createClient(AdminService, createGrpcTransport({ baseUrl: s.rpcUrl }));
  return admin.recoverFailedDeliveries({ endpointId: flaky.id, since: timestampFromDate(since) }, { headers: { authorization: `Bearer ${credential}` } });
}

/**
 * The retention job's batch as it runs (retention/job.ts): the event locked, then it and its rows
 * removed, the commit held until `request` (started meanwhile) waits on those locks; its answer.
 */
async function whileRemoving<T>(eventId: string, request: () => Promise<T>): Promise<T> {
  let answer: Promise<T> | undefined;
  await em().transactional(async (tx) => {
    await tx.execute(`select id from webhook_events where id = ? for update`, [eventId]);
    await tx.execute(`delete from webhook_attempts where delivery_id in (select id from webhook_deliveries where event_id = ?)`, [eventId]);
    await tx.execute(`delete from webhook_deliveries where event_id = ?`, [eventId]);
    await tx.execute(`delete from webhook_events where id = ?`, [eventId]);
    answer = request();
    answer.catch(() => undefined);
    await until(
      "the request waits on the removal's locks",
      async () => (await em().execute<{ n: number }[]>(`select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`))[0]!.n > 0,
      20_000,
    );
  });
  return answer!;
}

t.test("an event past retention is 404 and gone from the deliveries list; within it, it is there", async (t) => {
  const { deliveryId, eventId } = await sendTest(ok.id);
  await until("delivered", async () => (await statusOf(deliveryId))?.status === "delivered", 20_000);
  await age(eventId, 50);
  t.equal((await getEvent(eventId)).status, 200, "at 50 s: within retention");
  t.ok((await listed()).includes(deliveryId), "listed");

  await age(eventId, 11);
  const gone = await getEvent(eventId);
  t.equal(gone.status, 404, "past retention");
  t.equal(gone.body.error.code, "not_found");
  t.notOk((await listed()).includes(deliveryId), "not in the list");
  t.same(await listed(`&event_id=${eventId}`), [], "not by its event either");
  const replay = await call(base, "POST", `${merchantPath}/webhook-deliveries/${deliveryId}/replay`, { key: c.key, idempotencyKey: idemKey() });
  t.equal(replay.status, 404, "and cannot be replayed");
  const [row] = await em().execute<{ n: number }[]>(`select count(*)::int as n from webhook_events where id = ?`, [eventId]);
  t.equal(row?.n, 1, "nothing removed it yet: the read alone hides it");
});

t.test("a retrying delivery of the same age is kept, with its event, until it ends", async (t) => {
  const { deliveryId, eventId } = await sendTest(flaky.id);
  await until("a failed attempt, a retry waiting", async () => ((await statusOf(deliveryId))?.attempt_count ?? 0) >= 1, 20_000);
  await age(eventId, 61);
  const st = await statusOf(deliveryId);
  t.ok(st && (st.status === "pending" || st.status === "processing"), `still retrying (${JSON.stringify(st)})`);
  t.equal((await getEvent(eventId)).status, 200, "its event still answers");
  t.ok((await listed()).includes(deliveryId), "the retrying delivery is listed");

  failing = false;
  await until("delivered once the endpoint answers", async () => (await statusOf(deliveryId))?.status === "delivered", 30_000);
  t.equal((await getEvent(eventId)).status, 404, "ended: its event is past retention");
  t.notOk((await listed()).includes(deliveryId), "and the delivery left the list");
});

t.test("an operator's recovery reaches back no further than the retention: a failed delivery past it is not sent again", async (t) => {
  const [old, recent] = await twoFailed();
  // One is past retention.
  await age(old.eventId, 61);
  const res = await recover(new Date(0));
  const replayOf = await em().execute<{ replay_of: string }[]>(`select replay_of from webhook_deliveries where id = any(?::text[])`, [`{${res.deliveryIds.join(",")}}`]);
  t.same(replayOf.map((r) => r.replay_of), [recent.deliveryId], "only the failure within retention is replayed");
});

t.test("a replay racing the job's removal of its event is 404, never a 500", async (t) => {
  const { deliveryId, eventId } = await sendTest(ok.id);
  await until("delivered", async () => (await statusOf(deliveryId))?.status === "delivered", 20_000);
  const res = await whileRemoving(eventId, () => call(base, "POST", `${merchantPath}/webhook-deliveries/${deliveryId}/replay`, { key: c.key, idempotencyKey: idemKey() }));
  t.equal(res.status, 404, `the delivery is gone with its event (${res.status} ${JSON.stringify(res.body)})`);
  t.equal(res.body.error?.code, "not_found");
});

t.test("an operator's recovery racing the job's removal of an event replays what is left, and names only the replays it made", async (t) => {
  const [gone, left] = await twoFailed();
  const res = await whileRemoving(gone.eventId, () => recover(new Date(Date.now() - 30_000)));
  const replayOf = await em().execute<{ id: string; replay_of: string }[]>(`select id, replay_of from webhook_deliveries where replay_of in (?, ?)`, [gone.deliveryId, left.deliveryId]);
  t.same(replayOf.map((r) => r.replay_of), [left.deliveryId], "the delivery still there is replayed");
  t.same(res.deliveryIds, replayOf.map((r) => r.id), "and the reply names that replay alone");
});
