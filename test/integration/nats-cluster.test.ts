// Webhook delivery on a 3-node JetStream cluster (JETSTREAM_REPLICAS=3, NATS_URL listing the three
// servers): the stream's leader SIGKILLed in the middle of a burst loses no event, and the node
// rejoins as a current replica once it is back. Also: an existing 1-replica stream is scaled up by a
// worker started with JETSTREAM_REPLICAS=3, a standalone server is refused with one line, and a
// consumer deleted under a running worker is made again.
// Real nats-server processes (a private cluster on loopback ports), PostgreSQL, HTTPS receiver.
import { setTimeout as sleep } from "node:timers/promises";
import { jetstreamManager, type ClusterInfo, type JetStreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import t from "tap";
import { ensureDeliveryStream, streamNames } from "../../services/delivery/jetstream.ts";
import { schedule } from "../../services/delivery/schedule.ts";
import { signPayload } from "../../services/delivery/signature.ts";
import { natsServers } from "../../services/platform/nats.ts";
import { installationId } from "../../services/platform/settings.ts";
import { call, natsUrl, startTestApp, until } from "../helpers/harness.ts";
import { startNatsCluster, type NatsCluster } from "../helpers/nats-cluster.ts";
import { hookHost, webhookSetup, type WebhookSetup, createIntents, eventIdOf } from "../helpers/webhooks.ts";

interface Teardown {
  teardown(fn: () => unknown): void;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

/** The test's own connection to the cluster, closed at teardown. */
async function clusterClient(t: Teardown, cluster: NatsCluster): Promise<{ nc: NatsConnection; jsm: JetStreamManager }> {
  const nc = await connect({ servers: natsServers(cluster.url), maxReconnectAttempts: -1, reconnectTimeWait: 200 });
  t.teardown(() => nc.close());
  // A short API timeout: a request that reaches a server during an election is simply not answered.
  return { nc, jsm: await jetstreamManager(nc, { timeout: 2000 }) };
}

/** Leader and replicas as stream or consumer info reports them, e.g. "n2 (leader), n1 current, n3 current". */
function describe(c: ClusterInfo | undefined): string {
  if (!c) return "no cluster info";
  const replicas = (c.replicas ?? []).map((r) => `${r.name}${r.current ? " current" : ""}${r.offline ? " offline" : ""}`);
  return [c.leader ? `${c.leader} (leader)` : "no leader", ...replicas].join(", ");
}

/** A leader and `n - 1` other replicas, every one current and online. */
function allCurrent(c: ClusterInfo | undefined, n: number): boolean {
  const replicas = c?.replicas ?? [];
  return !!c?.leader && replicas.length === n - 1 && replicas.every((r) => r.current && !r.offline);
}

/** Waits until the stream and its consumer both have 3 current replicas; returns the stream's and consumer's info. */
async function waitForThreeReplicas(jsm: JetStreamManager, prefix: string, timeoutMs: number) {
  const names = streamNames(prefix);
  let last = "";
  return until(
    `stream ${names.stream} and consumer ${names.consumer} with 3 current replicas`,
    async () => {
      try {
        const [si, ci] = await Promise.all([jsm.streams.info(names.stream), jsm.consumers.info(names.stream, names.consumer)]);
        last = `stream: ${describe(si.cluster)}; consumer: ${describe(ci.cluster)}`;
        return allCurrent(si.cluster, 3) && allCurrent(ci.cluster, 3) ? { si, ci } : undefined;
      } catch (err) {
        last = (err as Error).message;
        return undefined;
      }
    },
    timeoutMs,
    () => last,
  );
}

/** Every delivery of the merchant through the REST API, all pages. */
async function allDeliveries(s: WebhookSetup): Promise<Json[]> {
  const out: Json[] = [];
  let cursor: string | null = null;
  do {
    const q: string = `limit=200${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`;
    const res = await call(s.base, "GET", `/api/v1/merchants/${s.creds.merchant}/webhook-deliveries?${q}`, { key: s.creds.key });
    if (res.status !== 200) throw new Error(`list deliveries: ${res.status} ${JSON.stringify(res.body)}`);
    out.push(...res.body.data);
    cursor = res.body.next_cursor ?? null;
  } while (cursor);
  return out;
}

async function deliveredCount(s: WebhookSetup): Promise<number> {
  const [row] = await s.app.db.em.fork().execute<{ n: number }[]>(`select count(*)::int as n from webhook_deliveries where status = 'delivered'`);
  return row?.n ?? 0;
}


t.test("the stream's leader SIGKILLed during a burst of 200 events: every event is delivered, none more often than its recorded attempts", async (t) => {
  const cluster = await startNatsCluster(t);
  const s = await webhookSetup(t, {
    // Retries (and redeliveries of a message whose acknowledgement was lost with the leader) after 1 s.
    // The burst of 200 creates with one key may pass the per-key write limit on a fast machine: lifted.
    env: { NATS_URL: cluster.url, JETSTREAM_REPLICAS: "3", WEBHOOK_RETRY_DELAYS: "1,1,1,1,1", WEBHOOK_TIMEOUT_MS: "5000", API_WRITE_RATE_LIMIT: "1000000" },
  });
  const names = streamNames(s.prefix);
  const { jsm } = await clusterClient(t, cluster);

  const { si, ci } = await waitForThreeReplicas(jsm, s.prefix, 20_000);
  t.equal(si.config.num_replicas, 3, "the delivery stream is configured with 3 replicas");
  t.equal(1 + (si.cluster?.replicas?.length ?? 0), 3, `and has 3: ${describe(si.cluster)}`);
  t.equal(ci.config.num_replicas ?? 0, 0, "the consumer takes its stream's replica count");
  t.equal(1 + (ci.cluster?.replicas?.length ?? 0), 3, `the durable consumer has 3 replicas: ${describe(ci.cluster)}`);
  const claim = await jsm.streams.info(names.claimStream);
  t.equal(claim.config.num_replicas, 3, "the prefix's claim stream too: losing one server must not stop the set-up");

  const ep = await s.createEndpoint();
  const count = 200;
  const began = Date.now();
  const creating = createIntents(s, count);
  creating.catch(() => undefined);
  // In the middle of the burst: some deliveries done, more still to come.
  await until("the first 40 deliveries reach the receiver", async () => s.receiver.requests.length >= 40, 30_000, () => `${s.receiver.requests.length} so far`);
  const leader = (await jsm.streams.info(names.stream)).cluster?.leader;
  t.ok(leader, `the stream has a leader: ${leader}`);
  const consumerLeader = (await jsm.consumers.info(names.stream, names.consumer)).cluster?.leader;
  const killedAt = s.receiver.requests.length;
  const killTime = Date.now();
  await cluster.kill(leader!);
  t.comment(`SIGKILLed ${leader}, the stream's leader (the consumer's: ${consumerLeader}; the app's server: ${s.app.nats.server()}), after ${killedAt} deliveries`);
  const intents = await creating;
  t.equal(new Set(intents).size, count, `${count} payment intents created while the cluster lost a server`);

  const events = await s.app.db.em.fork().execute<{ id: string; payload: string }[]>(`select id, payload from webhook_events where merchant_id = ?`, [s.creds.merchant]);
  t.equal(events.length, count, "one event per intent");
  let delivered = 0;
  await until(
    `all ${count} events at the receiver and their deliveries delivered`,
    async () => {
      const got = new Set(s.receiver.requests.map(eventIdOf));
      delivered = await deliveredCount(s);
      return events.every((e) => got.has(e.id)) && delivered === count;
    },
    60_000,
    () => `${new Set(s.receiver.requests.map(eventIdOf)).size} of ${count} events arrived, ${delivered} delivered`,
  );
  const at = s.receiver.requests.map((r) => r.at);
  const gap = Math.max(...at.slice(1).map((x, i) => x - at[i]!));
  t.comment(`all ${count} delivered ${Date.now() - began} ms after the burst began; ${Date.now() - killTime} ms after the kill; longest pause at the receiver ${gap} ms`);
  await sleep(1500); // a late copy would show up here (redeliveries come after 1 s)

  const after = await jsm.streams.info(names.stream);
  t.ok(after.cluster?.leader && after.cluster.leader !== leader, `another node leads the stream now: ${describe(after.cluster)}`);

  // At least once: an event may reach the receiver more than once only as separate attempts, every
  // one of them recorded. So per delivery: one successful attempt, the last, and no more requests
  // at the receiver than attempts in the API.
  const arrivals = new Map<string, number>();
  for (const r of s.receiver.requests) arrivals.set(eventIdOf(r), (arrivals.get(eventIdOf(r)) ?? 0) + 1);
  const deliveries = await allDeliveries(s);
  t.equal(deliveries.length, count, "one delivery per event");
  t.same(deliveries.filter((d) => d.status !== "delivered").map((d) => [d.id, d.status]), [], "every delivery ends delivered");
  const badAttempts = deliveries.filter((d) => {
    const successes = d.attempts.filter((a: Json) => a.outcome === "success");
    return d.attempt_count !== d.attempts.length || successes.length !== 1 || d.attempts.at(-1).outcome !== "success";
  });
  t.same(badAttempts.map((d) => [d.id, d.attempts]), [], "each with exactly one successful attempt, its last, and every attempt listed");
  const overSent = deliveries.filter((d) => (arrivals.get(d.event_id) ?? 0) > d.attempts.length);
  t.same(overSent.map((d) => [d.event_id, arrivals.get(d.event_id), d.attempts.length]), [], "no event reached the receiver more often than its delivery has attempts");
  const unknown = [...arrivals.keys()].filter((id) => !events.some((e) => e.id === id));
  t.same(unknown, [], "nothing else was sent");
  const payloads = new Map(events.map((e) => [e.id, e.payload]));
  t.ok(
    s.receiver.requests.every(
      (r) => r.body.toString("utf8") === payloads.get(eventIdOf(r)) && r.headers["x-service-signature"] === signPayload(ep.secret, Number(r.headers["x-service-timestamp"]), r.body),
    ),
    "every request carries its event's bytes, signed",
  );
  const repeated = deliveries.filter((d) => d.attempts.length > 1);
  t.comment(`${s.receiver.requests.length} requests for ${count} events; ${repeated.length} deliveries took more than one attempt`);

  await cluster.start(leader!);
  const back = await waitForThreeReplicas(jsm, s.prefix, 30_000);
  t.ok(allCurrent(back.si.cluster, 3), `${leader} is back: the stream has 3 current replicas again (${describe(back.si.cluster)})`);
  t.ok(allCurrent(back.ci.cluster, 3), `and so has the consumer (${describe(back.ci.cluster)})`);
  const ready = await fetch(`http://127.0.0.1:${s.app.ports.ops}/readyz`);
  t.equal(ready.status, 200, "the service is ready");
});

t.test("a worker started with JETSTREAM_REPLICAS=3 scales an existing 1-replica stream, which keeps delivering", async (t) => {
  const cluster = await startNatsCluster(t);
  // The API alone first: the streams are made as a worker without JETSTREAM_REPLICAS made them.
  const s = await webhookSetup(t, { roles: ["rpc", "gateway"], env: { NATS_URL: cluster.url } });
  const names = streamNames(s.prefix);
  const { nc, jsm } = await clusterClient(t, cluster);
  const installation = await installationId(s.app.db.em.fork());
  await until(
    "the 1-replica streams made",
    () => ensureDeliveryStream(nc, names, schedule([0.2, 0.2, 0.2, 0.2, 0.2], 6), { installation, prefix: s.prefix }, 1, s.config.webhookMaxAckPending).then(() => true, () => false),
    20_000,
  );
  const before = await jsm.streams.info(names.stream);
  t.equal(before.config.num_replicas, 1, "made with 1 replica");
  t.same(before.cluster?.replicas ?? [], [], `on one node: ${describe(before.cluster)}`);
  await s.createEndpoint();
  await createIntents(s, 5); // waiting in the outbox for a worker

  await startTestApp(
    t,
    {
      DATABASE_URL: s.databaseUrl,
      JETSTREAM_PREFIX: s.prefix,
      NATS_URL: cluster.url,
      JETSTREAM_REPLICAS: "3",
      WEBHOOK_CONNECT_TO: `${hookHost}:443:127.0.0.1:${s.receiver.port}`,
      WEBHOOK_RETRY_DELAYS: "0.2,0.2,0.2,0.2,0.2",
    },
    ["worker"],
    s.masterKey,
  );
  const { si, ci } = await waitForThreeReplicas(jsm, s.prefix, 20_000);
  t.equal(si.config.num_replicas, 3, `the stream now has 3 replicas: ${describe(si.cluster)}`);
  t.equal(1 + (ci.cluster?.replicas?.length ?? 0), 3, `its consumer too: ${describe(ci.cluster)}`);
  t.equal((await jsm.streams.info(names.claimStream)).config.num_replicas, 3, "and the claim stream");
  await until("the 5 deliveries delivered", async () => (await deliveredCount(s)) === 5, 20_000);
  t.equal(new Set(s.receiver.requests.map(eventIdOf)).size, 5, "every event reached the receiver");
});

t.test("JETSTREAM_REPLICAS=3 against a server that is not part of a cluster: the worker refuses to start, saying why", async (t) => {
  const err = await startTestApp(t, { NATS_URL: natsUrl, JETSTREAM_REPLICAS: "3" }, ["worker"]).then(
    () => undefined,
    (e: Error) => e,
  );
  t.ok(err, "start fails");
  t.match(err?.message, /^JETSTREAM_REPLICAS is 3, but the NATS server .* is not part of a cluster/, "the message names the setting and the problem");
  t.match(err?.message, /list a JetStream cluster's servers in NATS_URL, or set JETSTREAM_REPLICAS=1/, "and what to do");
});

t.test("the durable consumer deleted under a running worker is made again, and delivery goes on", async (t) => {
  const s = await webhookSetup(t, { env: { NATS_URL: natsUrl } });
  const names = streamNames(s.prefix);
  const nc = await connect({ servers: natsUrl });
  t.teardown(() => nc.close());
  const jsm = await jetstreamManager(nc);
  await s.createEndpoint();
  await createIntents(s, 1);
  await until("the first delivery delivered", async () => (await deliveredCount(s)) === 1, 20_000);

  t.ok(await jsm.consumers.delete(names.stream, names.consumer), "the consumer is deleted (its pending pull request with it)");
  await createIntents(s, 5);
  await until("the next 5 deliveries delivered", async () => (await deliveredCount(s)) === 6, 30_000, () => `${s.receiver.requests.length} requests`);
  const ci = await jsm.consumers.info(names.stream, names.consumer);
  t.equal(ci.name, names.consumer, "the worker made the consumer again");
  t.equal(new Set(s.receiver.requests.map(eventIdOf)).size, 6, "every event reached the receiver");
});
