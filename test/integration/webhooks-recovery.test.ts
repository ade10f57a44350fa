// endpoint enable --recover-since: bounded (a window and a count; --force beyond), enqueued a page
// at a time by the scheduler, each missed event delivered once and in event order, and only the
// types the endpoint takes as live delivery decides them: payment.detected only to an endpoint
// that names it. Real PostgreSQL, NATS, the admin CLI against the running AdminService, and a
// local HTTPS receiver; payment.detected comes from a watcher's mempool report (ChainService).
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import t from "tap";
import { ChainService } from "../../gen/payments/v1/chains_pb.ts";
import { createInternalCredential } from "../../services/auth/admin.ts";
import { call, idemKey, merchantWithKey, until, type Credentials } from "../helpers/harness.ts";
import { hash, watcherClient } from "../helpers/lifecycle.ts";
import { runCli } from "../helpers/processes.ts";
import { eventIdOf, hookHost, webhookSetup } from "../helpers/webhooks.ts";

const pageSize = 3;
const maxEvents = 8;
// One attempt at a time: the receiver sees the deliveries in the order the worker takes them. No
// attempt here fails, so retries need not be quick; the 5 s schedule keeps a slow attempt on a
// loaded machine from being taken over by a redelivered copy (issue 48, part 1), which would
// count as a second arrival.
// The slow receiver takes 300 ms a request: a recovery to it is still running when a webhook of
// another merchant comes.
const slowMs = 300;
const s = await webhookSetup(t, {
  respond: (req) => (req.url.startsWith("/recovery/slow") ? { status: 200, delayMs: slowMs } : { status: 200 }),
  roles: ["rpc", "gateway", "worker", "scheduler"],
  env: {
    WEBHOOK_RECOVERY_MAX_EVENTS: String(maxEvents),
    WEBHOOK_RECOVERY_PAGE_SIZE: String(pageSize),
    WEBHOOK_CONCURRENCY: "1",
    WEBHOOK_RETRY_DELAYS: "5,5,5,5,5",
    WEBHOOK_TIMEOUT_MS: "4000",
  },
});
const { credential } = await createInternalCredential(s.app.db.em.fork(), "webhooks-recovery test", ["admin"], "test");
const cliEnv = { RPC_URL: s.rpcUrl, INTERNAL_CREDENTIAL: credential };
const recover = (endpointId: string, since: Date, ...more: string[]) =>
  runCli("services/app/admin.ts", cliEnv, "endpoint", "enable", "--id", endpointId, "--recover-since", since.toISOString(), ...more);

async function endpointOn(m: Credentials, path: string, enabledEvents?: string[]): Promise<string> {
  const res = await call(s.base, "POST", `/api/v1/merchants/${m.merchant}/webhook-endpoints`, {
    key: m.key,
    body: { url: `https://${hookHost}${path}`, ...(enabledEvents ? { enabled_events: enabledEvents } : {}) },
  });
  if (res.status !== 200) throw new Error(`create endpoint: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data.id as string;
}

async function disable(m: Credentials, id: string): Promise<void> {
  const res = await call(s.base, "POST", `/api/v1/merchants/${m.merchant}/webhook-endpoints/${id}/disable`, { key: m.key });
  if (res.status !== 200) throw new Error(`disable: ${res.status}`);
}

async function statusOf(m: Credentials, id: string): Promise<string> {
  return (await call(s.base, "GET", `/api/v1/merchants/${m.merchant}/webhook-endpoints/${id}`, { key: m.key })).body.data.status;
}

async function createIntent(m: Credentials, body: Record<string, string> = { network: "ethereum", asset: "USDC", requested_amount: "1.00" }) {
  const res = await call(s.base, "POST", `/api/v1/merchants/${m.merchant}/payment-intents`, { key: m.key, idempotencyKey: idemKey(), body });
  if (res.status !== 200) throw new Error(`create intent: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data as { public_id: string; deposit_address: string };
}

/** The merchant's events recorded since `since`, in event order. */
async function eventsSince(m: Credentials, since: Date): Promise<{ id: string; type: string }[]> {
  return s.app.db.em.fork().execute(`select id, type from webhook_events where merchant_id = ? and environment = 'test' and created_at >= ? order by created_at, id`, [m.merchant, since]);
}

const deliveriesOf = async (endpointId: string) =>
  (await s.app.db.em.fork().execute<{ n: number }[]>(`select count(*)::int as n from webhook_deliveries where endpoint_id = ?`, [endpointId]))[0]?.n;

/** Event ids the receiver got on `path`, in the order they arrived (a redelivery appears again). */
const arrivedAt = (path: string) => s.receiver.requests.filter((r) => r.url === path).map(eventIdOf);

const timesEach = (ids: string[]) => ids.reduce((m, id) => m.set(id, (m.get(id) ?? 0) + 1), new Map<string, number>());

t.test("a recovery over the bounds is refused without --force and changes nothing; forced, each missed event arrives once, in event order, enqueued a page at a time", async (t) => {
  const m = await merchantWithKey(s.app);
  const path = "/recovery/forced";
  const endpoint = await endpointOn(m, path);
  await disable(m, endpoint);
  const since = new Date();
  for (let i = 0; i < maxEvents + 1; i++) await createIntent(m);
  const missed = (await eventsSince(m, since)).map((e) => e.id);
  t.equal(missed.length, maxEvents + 1, "it missed one event more than WEBHOOK_RECOVERY_MAX_EVENTS");

  const tooMany = await recover(endpoint, since);
  t.equal(tooMany.code, 2, "more events than the bound: refused");
  t.match(tooMany.stderr, /WEBHOOK_RECOVERY_MAX_EVENTS[^\n]*--force/, "saying which bound, and --force");
  t.equal(tooMany.stderr.trim().split("\n").length, 1, "on one line");
  const tooFar = await recover(endpoint, new Date(Date.now() - 8 * 86_400_000));
  t.equal(tooFar.code, 2, "a window longer than WEBHOOK_RECOVERY_MAX_DAYS (7 by default): refused");
  t.match(tooFar.stderr, /WEBHOOK_RECOVERY_MAX_DAYS[^\n]*--force/);
  t.equal(await statusOf(m, endpoint), "disabled", "a refused recovery leaves the endpoint disabled");
  t.equal(await deliveriesOf(endpoint), 0, "and creates no delivery");
  const stray = await runCli("services/app/admin.ts", cliEnv, "endpoint", "enable", "--id", endpoint, "--force");
  t.equal(stray.code, 2, "--force without --recover-since is refused");
  t.equal(await statusOf(m, endpoint), "disabled");

  const forced = await recover(endpoint, since, "--force");
  t.equal(forced.code, 0, `forced, it runs (${forced.stderr})`);
  const out = JSON.parse(forced.stdout || "{}");
  t.equal(out.status, "enabled");
  t.equal(out.recovered, missed.length, "the reply counts the events it recovers");
  t.equal(out.enqueued, pageSize, "of which the request enqueued one page");
  t.match(out.recovery_id, /^wr_/, "the rest is a recovery the scheduler goes on with");
  t.equal(out.first_event_id, missed[0], "the first event");
  t.equal(out.last_event_id, missed.at(-1), "and the last");
  t.notOk("delivery_ids" in out, "and no list of every delivery");

  await until("every missed event at the endpoint", async () => missed.every((id) => arrivedAt(path).includes(id)), 60_000, () => `${new Set(arrivedAt(path)).size} of ${missed.length}`);
  // A sentinel: an event recorded after the recovery arrives behind anything it could still send.
  const sentinelIntent = await createIntent(m);
  const [sentinel] = (await s.app.db.em.fork().execute<{ id: string }[]>(`select id from webhook_events where payment_intent_id = ?`, [sentinelIntent.public_id])).map((e) => e.id);
  await until("the sentinel at the endpoint", async () => arrivedAt(path).includes(sentinel ?? ""), 30_000);
  const arrived = arrivedAt(path);
  const times = timesEach(arrived);
  for (const id of missed) t.equal(times.get(id), 1, `${id} arrived once`);
  t.same([...new Set(arrived)].filter((id) => missed.includes(id)), missed, "in event order");
  t.same([...times.keys()].sort(), [...missed, sentinel].sort(), "and nothing else arrived");
  t.equal(await deliveriesOf(endpoint), missed.length + 1, "one delivery per event");
  const recovery = await until(
    "the recovery done",
    async () => (await s.app.db.em.fork().execute<{ status: string; enqueued: number }[]>(`select status, enqueued from webhook_recoveries where id = ? and status = 'done'`, [out.recovery_id]))[0],
    30_000,
  );
  t.equal(recovery.enqueued, missed.length, "the recovery enqueued every missed event");

  const again = await recover(endpoint, since, "--force");
  t.equal(JSON.parse(again.stdout || "{}").recovered, 0, "run again: nothing more to recover");
});

t.test("a recovery follows each endpoint's event filter as live delivery does: payment.detected to \"*\", not to a list without it", async (t) => {
  const m = await merchantWithKey(s.app);
  const everything = await endpointOn(m, "/recovery/everything");
  const named = await endpointOn(m, "/recovery/named", ["payment.intent.created", "payment.confirmed"]);
  await disable(m, everything);
  await disable(m, named);
  const since = new Date();

  // A bitcoin payment seen in the mempool, reported by the chain's watcher: payment.detected.
  const { headers } = await watcherClient(s.app, s.rpcUrl, "test", ["bitcoin"]);
  const chains = createClient(ChainService, createGrpcTransport({ baseUrl: s.rpcUrl }));
  const holder = await until(
    "the bitcoin lease",
    async () => {
      const c = await chains.claimChain({ network: "bitcoin", watcherId: "recovery-watcher", leaseSeconds: 60 }, { headers });
      return c.active ? c : undefined;
    },
    20_000,
  );
  const recent = holder.position?.recentBlocks.at(-1);
  const height = BigInt(Number(recent?.height ?? 99n) + 1);
  const tipHash = hash();
  await chains.reportBlocks({ network: "bitcoin", watcherId: "recovery-watcher", leaseEpoch: holder.epoch, blocks: [{ height, hash: tipHash, parentHash: recent?.hash ?? hash(), outputs: [] }], headHeight: height }, { headers });
  const intent = await createIntent(m, { network: "bitcoin", asset: "BTC", requested_amount: "0.001" });
  await chains.reportMempool(
    {
      network: "bitcoin",
      watcherId: "recovery-watcher",
      leaseEpoch: holder.epoch,
      tipHash,
      outputs: [{ output: { asset: "BTC", toAddress: intent.deposit_address, txHash: hash(), outputIndex: 0, amount: "0.001" }, replaceable: false }],
      conflicted: [],
    },
    { headers },
  );
  await createIntent(m);
  const events = await until("payment.detected recorded", async () => {
    const e = await eventsSince(m, since);
    return e.some((x) => x.type === "payment.detected") ? e : undefined;
  }, 20_000);
  t.same(events.map((e) => e.type).sort(), ["payment.detected", "payment.intent.created", "payment.intent.created"], "two creations and a detection while both were disabled");
  const created = events.filter((e) => e.type === "payment.intent.created").map((e) => e.id);
  const all = events.map((e) => e.id);

  const toEverything = await recover(everything, since);
  t.equal(toEverything.code, 0, toEverything.stderr);
  t.equal(JSON.parse(toEverything.stdout).recovered, 3, `"*" recovers every type: the creations and payment.detected`);
  const toNamed = await recover(named, since);
  t.equal(toNamed.code, 0, toNamed.stderr);
  t.equal(JSON.parse(toNamed.stdout).recovered, 2, "the endpoint whose list leaves payment.detected out recovers the creations only");

  await until("the recovered events at both", async () => all.every((id) => arrivedAt("/recovery/everything").includes(id)) && created.every((id) => arrivedAt("/recovery/named").includes(id)), 30_000);
  const sentinelIntent = await createIntent(m);
  const [sentinel] = (await s.app.db.em.fork().execute<{ id: string }[]>(`select id from webhook_events where payment_intent_id = ?`, [sentinelIntent.public_id])).map((e) => e.id);
  await until("the sentinel at both", async () => [arrivedAt("/recovery/everything"), arrivedAt("/recovery/named")].every((a) => a.includes(sentinel ?? "")), 30_000);
  t.same([...timesEach(arrivedAt("/recovery/everything")).entries()].sort(), [...all, sentinel].map((id) => [id, 1]).sort(), `"*": each event once, payment.detected among them`);
  t.same(arrivedAt("/recovery/everything").slice(0, 3), all, "in event order");
  t.same([...timesEach(arrivedAt("/recovery/named")).entries()].sort(), [...created, sentinel].map((id) => [id, 1]).sort(), "the list without it: each creation once, never payment.detected");
});

t.test("a recovery does not hold another merchant's webhooks behind it: only about a page of it is queued at a time", async (t) => {
  const m = await merchantWithKey(s.app);
  const other = await merchantWithKey(s.app);
  const path = "/recovery/slow";
  const endpoint = await endpointOn(m, path);
  const otherPath = "/recovery/other-merchant";
  await endpointOn(other, otherPath);
  await disable(m, endpoint);
  const since = new Date();
  const n = 10 * pageSize;
  for (let i = 0; i < n; i++) await createIntent(m);
  const missed = (await eventsSince(m, since)).map((e) => e.id);
  t.equal(missed.length, n);

  const forced = await recover(endpoint, since, "--force");
  t.equal(forced.code, 0, forced.stderr);
  t.equal(JSON.parse(forced.stdout).enqueued, pageSize, "one page enqueued by the request");
  // Another merchant's webhook, recorded while the recovery runs (n × slowMs).
  const live = await createIntent(other);
  const aheadAtStart = arrivedAt(path).length;
  const [liveEvent] = (await s.app.db.em.fork().execute<{ id: string }[]>(`select id from webhook_events where payment_intent_id = ?`, [live.public_id])).map((e) => e.id);
  await until("every recovered event and the other merchant's", async () => missed.every((id) => arrivedAt(path).includes(id)) && arrivedAt(otherPath).includes(liveEvent ?? ""), 90_000);
  const order = s.receiver.requests.filter((r) => r.url === path || r.url === otherPath).map(eventIdOf);
  const at = order.indexOf(liveEvent ?? "");
  const before = order.slice(0, at).filter((id) => missed.includes(id)).length;
  t.ok(before < missed.length, `the other merchant's webhook arrived before the recovery ended (after ${before} of its ${missed.length})`);
  // Queued ahead of it: what was left of the page in the stream and at most the next one.
  t.ok(before - aheadAtStart <= 2 * pageSize, `behind at most two pages of it (${before - aheadAtStart}), not the whole recovery`);
  t.same([...new Set(arrivedAt(path))], missed, "the recovery: each event, in event order");
});
