// The outbox relay's pass commits its mark before it publishes (services/delivery/relay.ts): a
// worker's claim of a delivery waits for no relay, a publish that fails puts its delivery back in
// the outbox, and what a relay that died between its mark and its publish left out of the stream
// goes out when a relay starts. Real PostgreSQL (the service's migrations and partitions), real
// NATS JetStream; the relays here poll once in ten minutes, so a pass runs when a case wakes one.
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import t from "tap";
import { ensureDeliveryStream, streamNames } from "../../services/delivery/jetstream.ts";
import { OutboxWake } from "../../services/delivery/outbox-wake.ts";
import { startRelay } from "../../services/delivery/relay.ts";
import { schedule } from "../../services/delivery/schedule.ts";
import { claimDeliveries, putBackUnpublished } from "../../services/delivery/webhook-deliveries.ts";
import { createLogger } from "../../services/platform/logger.ts";
import { Nats } from "../../services/platform/nats.ts";
import { deleteStream, natsUrl, uniqueName, until } from "../helpers/harness.ts";
import { outboxDatabase, outboxDeliveries } from "../helpers/outbox.ts";

const { databaseUrl, db, em } = await outboxDatabase(t);
const deliveries = (count: number) => outboxDeliveries(em(), count);

const logger = createLogger("silent");
const nats = new Nats(natsUrl, logger, "relay-publish-test");
t.teardown(() => nats.close());
const nc = await nats.connected;

/** Marked published by a relay `agoMs` ago, as its pass leaves them once the mark commits. */
async function marked(ids: readonly string[], agoMs = 0): Promise<void> {
  await em().execute(`update webhook_deliveries set published_at = now() - make_interval(secs => ?) where id in (?)`, [agoMs / 1000, ids]);
}
type Row = { id: string; published: boolean; status: string; republished: number };
async function rows(ids: readonly string[]): Promise<Map<string, Row>> {
  const found = await em().execute<Row[]>(`select id, published_at is not null as published, status, republished from webhook_deliveries where id in (?)`, [ids]);
  return new Map(found.map((r) => [r.id, r]));
}

t.test("a relay publishes at its start what a relay that died between its mark and its publish left out, once", async (t) => {
  const prefix = uniqueName("relaypub").toLowerCase();
  const names = streamNames(prefix);
  t.teardown(() => deleteStream(prefix));
  await ensureDeliveryStream(nc, names, schedule([60, 300], 3), { installation: prefix, prefix }, 1, 1000);
  const jsm = await jetstreamManager(nc);
  const inStream = async () => (await jsm.streams.info(names.stream)).state.messages;
  const last = async () => (await jsm.streams.getMessage(names.stream, { last_by_subj: names.subject }).catch(() => null)) ?? undefined;

  // Marked and in the stream (a relay's pass went through; no worker has claimed it yet).
  const [waiting] = await deliveries(1);
  await jetstream(nc).publish(names.subject, waiting!, { msgID: waiting! });
  // Marked, out of the stream: the relay died before its publish.
  const lost = await deliveries(2);
  // Marked longer ago than JetStream's duplicate window, and marked and claimed since: not the catch-up's.
  const [old] = await deliveries(1);
  const [claimed] = await deliveries(1);
  await marked([waiting!, ...lost]);
  await marked([old!], 11 * 60_000);
  await marked([claimed!]);
  await em().execute(`update webhook_deliveries set status = 'processing', attempt_count = 1, stream_seq = 999 where id = ?`, [claimed]);
  t.equal(await inStream(), 1, "the stream holds the one a pass published");

  const wake = new OutboxWake();
  const relay = startRelay({ db, databaseUrl, nats, names, logger, streamReady: async () => undefined, pollMs: 600_000, outboxWake: wake });
  t.teardown(() => relay.stop());
  await until("the lost deliveries in the stream", async () => (await inStream()) >= 3, 10_000, () => `the stream holds 1 + 0 or 1`);
  const backlog = await jsm.streams.getMessage(names.stream, { last_by_subj: names.backlogSubject }).catch(() => null);
  t.ok(backlog && lost.includes(backlog.string()), "published on the backlog lane, taking no merchant's share of the main one");
  // A sentinel after them, on the same connection: a create's delivery, published by a pass.
  const [sentinel] = await deliveries(1);
  wake.wake();
  await until("the sentinel in the stream", async () => (await last())?.string() === sentinel, 10_000);
  const [{ event_id } = { event_id: "" }] = await em().execute<{ event_id: string }[]>(`select event_id from webhook_deliveries where id = ?`, [sentinel]);
  t.equal((await last())?.header.get("Event-Id"), event_id, "its message names its event, for the claim to read in the same statement");
  t.equal(await inStream(), 4, "the two lost, then the sentinel: the waiting one was not added again, the old and the claimed not published");
});

t.test("a pass's deliveries are marked and unlocked while their publish waits: a claim answers at once, and a failed publish puts back only what no claim took", async (t) => {
  // Subjects with no stream behind them and a subscriber that never answers: each publish waits
  // for its acknowledgement until its timeout (5 s), then fails.
  const names = streamNames(uniqueName("relaypubnoack").toLowerCase());
  const heard: string[] = [];
  const sub = nc.subscribe(`${names.subject}.>`);
  const main = nc.subscribe(names.subject);
  t.teardown(() => {
    sub.unsubscribe();
    main.unsubscribe();
  });
  void (async () => {
    for await (const m of main) heard.push(m.string());
  })();
  void (async () => {
    for await (const m of sub) heard.push(m.string());
  })();
  await nc.flush();

  // What the case before left is done: this relay's catch-up at its start finds nothing to publish.
  await em().execute(`update webhook_deliveries set status = 'delivered'`);
  const wake = new OutboxWake();
  const relay = startRelay({ db, databaseUrl, nats, names, logger, streamReady: async () => undefined, pollMs: 600_000, outboxWake: wake });
  t.teardown(() => relay.stop());
  const [claimedMeanwhile, left] = await deliveries(2);
  wake.wake();
  await until("both publishes in flight", async () => heard.includes(claimedMeanwhile!) && heard.includes(left!), 10_000, () => `heard ${heard.length}`);

  // The marks are committed while the publishes wait: a worker's claim takes one without waiting
  // for the pass (it waited for the pass's end, its publishes acknowledged or failed).
  const seen = await rows([claimedMeanwhile!, left!]);
  t.same([seen.get(claimedMeanwhile!)?.published, seen.get(left!)?.published], [true, true], "both marked published while their publish waits");
  const [claim] = await claimDeliveries(em(), [{ id: claimedMeanwhile!, seq: 7 }], new Date(), 60_000);
  t.ok(claim && "claimed" in claim, "the claim took the delivery");
  t.equal((await rows([left!])).get(left!)?.published, true, "the claim answered while the pass's other publish still waited (its delivery still marked)");

  // The publishes time out: the pass puts back the one no claim took, and leaves the claimed one as the claim left it.
  await until("the unclaimed one back in the outbox", async () => (await rows([left!])).get(left!)?.published === false, 15_000);
  const after = await rows([claimedMeanwhile!, left!]);
  t.same(
    [after.get(claimedMeanwhile!)?.published, after.get(claimedMeanwhile!)?.status, after.get(left!)?.status],
    [true, "processing", "pending"],
    "the claimed one still marked, processing; the other pending, unpublished",
  );
});

t.test("putting back leaves a delivery claimed since, and one sent back and taken again since, as they are", async (t) => {
  const [claimed, back, fresh] = await deliveries(3);
  await marked([claimed!, back!, fresh!]);
  // A publish that timed out may have reached the stream, and a worker claimed it; a worker sent another back (requeueHeldBack), and a pass took it again.
  await em().execute(`update webhook_deliveries set status = 'processing', attempt_count = 1, stream_seq = 7 where id = ?`, [claimed]);
  await em().execute(`update webhook_deliveries set republished = 1 where id = ?`, [back]);
  t.equal(
    await putBackUnpublished(em(), [claimed!, back!, fresh!].map((id) => ({ id, republished: 0 }))),
    1,
    "one put back",
  );
  const r = await rows([claimed!, back!, fresh!]);
  t.same([r.get(claimed!)?.published, r.get(back!)?.published, r.get(fresh!)?.published], [true, true, false]);
});
