// A PostgreSQL failover under load, as production would run it: a primary with a synchronous
// streaming standby, the service reaching "the database" through one address (here a TCP proxy
// the test controls; in production a virtual IP or a DNS name). The primary is lost, the standby
// promoted, the address moved. Clients see 503s during the switch and nothing else; every
// acknowledged create is on the new primary, every recorded event is delivered, and every
// request after the switch succeeds.
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import t from "tap";
import { call, idemKey, sampleIntent, until, type ApiResponse } from "../helpers/harness.ts";
import { startStandbyPair } from "../helpers/pg-standby.ts";
import { startTcpProxy } from "../helpers/tcp-proxy.ts";
import { webhookSetup } from "../helpers/webhooks.ts";

interface Outcome {
  status: number;
  response: ApiResponse;
  /** Whether the request was sent after the switch had completed. */
  afterSwitch: boolean;
}

t.test("failover to a synchronous standby under load: 503s during the switch only, nothing acknowledged lost", { timeout: 150_000 }, async (t) => {
  const pair = await startStandbyPair(t);
  const admin = new pg.Client({ connectionString: pair.url(pair.primaryPort) });
  await admin.connect();
  await admin.query("create database payments");
  await admin.end();

  const proxy = await startTcpProxy(t, pair.primaryPort);
  const databaseUrl = pair.url(proxy.port, "payments");
  const s = await webhookSetup(t, { env: { DATABASE_URL: databaseUrl, DB_POOL_SIZE: "4" } });
  await s.createEndpoint();
  const { merchant, key } = s.creds;
  const intents = `/api/v1/merchants/${merchant}/payment-intents`;

  const outcomes: Outcome[] = [];
  let switched = false;
  let loadOn = true;
  const client = async () => {
    while (loadOn) {
      const afterSwitch = switched;
      const response = await call(s.base, "POST", intents, { key, idempotencyKey: idemKey(), body: sampleIntent });
      outcomes.push({ status: response.status, response, afterSwitch });
      await sleep(40);
    }
  };
  const clients = Promise.all([client(), client(), client()]);
  t.teardown(async () => {
    loadOn = false;
    await clients;
  });
  await until("creates acknowledged before the failover", async () => outcomes.filter((o) => o.status === 200).length >= 20, 30_000);

  await pair.stopPrimary();
  await until("clients see the primary gone", async () => outcomes.some((o) => o.status === 503), 20_000);
  await pair.promoteStandby();
  proxy.retarget(pair.standbyPort);
  switched = true;
  await until("creates sent after the switch succeed", async () => outcomes.filter((o) => o.afterSwitch && o.status === 200).length >= 20, 30_000, () =>
    JSON.stringify(outcomes.filter((o) => o.afterSwitch).slice(-5).map((o) => [o.status, o.response.body?.error?.message])),
  );
  loadOn = false;
  await clients;

  const statuses = [...new Set(outcomes.map((o) => o.status))].sort();
  t.same(statuses.filter((s) => s !== 200 && s !== 503), [], `every create answered 200 or 503 (${statuses.join(", ")})`);
  const unavailable = outcomes.filter((o) => o.status === 503);
  t.ok(unavailable.every((o) => o.response.headers.get("retry-after") !== null && o.response.body?.error?.code === "unavailable"), `the ${unavailable.length} refused creates: 503 unavailable with Retry-After`);
  const after = outcomes.filter((o) => o.afterSwitch);
  t.same(after.filter((o) => o.status !== 200).map((o) => o.status), [], `all ${after.length} creates sent after the switch succeeded`);

  // Every acknowledged create is on the new primary.
  const acknowledged = outcomes.filter((o) => o.status === 200).map((o) => o.response.body.data.public_id as string);
  const newPrimary = new pg.Client({ connectionString: pair.url(pair.standbyPort, "payments") });
  await newPrimary.connect();
  t.teardown(() => newPrimary.end());
  const { rows } = await newPrimary.query<{ id: string }>("select id from payment_intents where merchant_id = $1", [merchant]);
  const stored = new Set(rows.map((r) => r.id));
  t.same(acknowledged.filter((id) => !stored.has(id)), [], `all ${acknowledged.length} acknowledged creates are on the promoted standby`);

  // Every event recorded there reaches the receiver.
  const events = (await newPrimary.query<{ id: string }>("select id from webhook_events where merchant_id = $1", [merchant])).rows.map((r) => r.id);
  const delivered = () => new Set(s.receiver.requests.map((r) => String(r.headers["x-service-event-id"])));
  await until("every recorded event delivered", async () => events.every((id) => delivered().has(id)), 60_000, () => {
    const got = delivered();
    return `${events.filter((id) => !got.has(id)).length} of ${events.length} not delivered`;
  });
  t.pass(`all ${events.length} recorded events delivered`);
});
