import type { EntityManager } from "../platform/db.ts";
import { executeByKey, executePrepared } from "../platform/prepared.ts";
import { createdAtOfId, createdAtRange, deliveryTimeOf, forgetLayout, partitionHolding } from "../platform/time-partitions.ts";
import type { Outcome } from "./classify.ts";
import type { DeliveryCause, DeliveryStatus } from "../vocabulary/delivery-status.ts";

/**
 * The one writer of webhook_deliveries and webhook_attempts (test/unit/one-writer.test.ts fails
 * on a write anywhere else): every other module names what it needs as one of these functions; a
 * statement that must stay one statement (an intent, its event and its deliveries, written
 * together) takes its SQL text from here (pendingDeliveries, legacyDeliveriesRemoval). So what can
 * happen to a delivery is read in one file, and each move is guarded by the status it moves from.
 *
 * A delivery's status changes (the words: vocabulary/delivery-status.ts):
 * - (new) → pending: pendingDeliveries, with why it is made (cause: event, replay, recovery);
 * - pending → processing: claimDeliveries, a worker starts an attempt;
 * - processing → processing: claimDeliveries, another worker takes over the attempt of one that stopped;
 * - processing → delivered | pending (a retry scheduled) | failed: finishAttempts;
 * - processing → failed: failClaimed (its endpoint was disabled meanwhile, endpoint_disabled),
 *   failAbandoned (its worker stopped during the last attempt, worker_lost), giveUpAttempt (a
 *   stopping worker gave up on the last attempt, worker_lost);
 * - processing → pending: giveUpAttempt (a stopping worker gave up on an attempt with more to come: worker_lost, retried on schedule);
 * - pending → failed: failPendingOfEndpoint (its endpoint was disabled, endpoint_disabled);
 * - failed → delivered | failed: finishAttempts, only for a last attempt failAbandoned ended while
 *   its worker was cut off from the database (worker_lost): the finish wins.
 * delivered and failed are final otherwise; a replay or a recovery is a new delivery.
 * Without a change of status: takeUnpublished marks deliveries published; putBackUnpublished,
 * requeue, requeueHeldBack and republishStranded put them back in the outbox. Attempts are
 * written by finishAttempts, recordLostAttempt, failAbandoned and giveUpAttempt. Rows go with
 * their event past retention (legacyDeliveriesRemoval for the legacy partitions; days are dropped
 * whole, DDL, by retention/partitions.ts) and with a deleted endpoint (on delete cascade).
 */

// ---- new deliveries ----

/**
 * The columns of the pending deliveries a statement makes, as SQL expressions over the rows of
 * `from` (the rest of the select: `from … where …`). Their parameters come in this order: id,
 * merchantId, environment, eventId, endpointId, replayOf, createdAt, updatedAt, then from's.
 */
export interface PendingRows {
  id: string;
  merchantId: string;
  environment: string;
  eventId: string;
  endpointId: string;
  /** The delivery a replay sends again (cause replay only). */
  replayOf?: string;
  createdAt: string;
  updatedAt: string;
  from: string;
}

/**
 * The one constructor of a delivery, as an INSERT … SELECT returning the new ids: pending, no
 * attempt yet, and why it is made (`cause`). Every delivery comes from here, original or sent
 * again, so a recovered or replayed one never looks like an original. The caller runs it in its
 * own transaction (with the event, the replay's lock on it, the recovery's page), or as a CTE of a
 * statement that must stay one (events/record.ts eventCtes); an insert wakes the relay at commit
 * (the outbox trigger).
 */
export function pendingDeliveries(cause: DeliveryCause, rows: PendingRows): string {
  // A replay names its original; nothing else does (replay_of is how a replay is found again).
  if ((cause === "replay") !== (rows.replayOf !== undefined)) throw new Error(`pendingDeliveries: replay_of goes with the cause replay, not ${cause}`);
  return `insert into webhook_deliveries (id, merchant_id, environment, event_id, endpoint_id, replay_of, created_at, updated_at, status, attempt_count, cause)
       select ${rows.id}, ${rows.merchantId}, ${rows.environment}, ${rows.eventId}, ${rows.endpointId}, ${rows.replayOf ?? "null"}, ${rows.createdAt}, ${rows.updatedAt}, 'pending', 0, '${cause}'
         ${rows.from}
       returning id`;
}

/** Runs pendingDeliveries alone, in the caller's transaction (`em`); the ids made. */
export async function insertPendingDeliveries(em: EntityManager, cause: DeliveryCause, rows: PendingRows, params: readonly unknown[]): Promise<string[]> {
  const inserted = await executePrepared<{ id: string }>(em, pendingDeliveries(cause, rows), params);
  return inserted.map((r) => r.id);
}

// ---- an endpoint's, an event's ----

/** Ends the endpoint's deliveries that have not started an attempt (it was disabled); returns how many. */
export async function failPendingOfEndpoint(em: EntityManager, endpointId: string, at: Date): Promise<number> {
  const rows = await em.execute<{ id: string }[]>(
    `update webhook_deliveries set status = 'failed', last_error = 'endpoint_disabled', next_attempt_at = null, updated_at = ?
      where endpoint_id = ? and status = 'pending' returning id`,
    [at, endpointId],
  );
  return rows.length;
}

/**
 * The removal of the deliveries and attempts of the events of the CTE `events` (ids, locked by the
 * caller) from the legacy partitions (rows from before the days; the days are dropped whole), as
 * CTEs of the caller's statement: `removed_attempts` and `removed_deliveries` yield a row for each
 * row removed. The caller checks that none of those deliveries has not ended.
 */
export function legacyDeliveriesRemoval(events: string): string {
  return `removing as (
            select id from webhook_deliveries_legacy where event_id in (select id from ${events}) for update
          ), removed_attempts as (
            delete from webhook_attempts_legacy where delivery_id in (select id from removing) returning 1
          ), removed_deliveries as (
            delete from webhook_deliveries_legacy where id in (select id from removing) returning 1
          )`;
}

// ---- the relay ----

/**
 * How long before its retry is due a delivery waiting in the outbox is published: at least a
 * relay poll's worth, so that its message is in JetStream when the retry is due. A message that
 * comes a little early waits for its time in the worker, or is NAKed until then (claimDeliveries:
 * "early"), so the retry keeps its schedule to the millisecond.
 */
export const publishAheadMs = 3000;

/**
 * Up to `batch` deliveries to publish, created at or after `since`, locked so that concurrent
 * relays take different rows, each with the Nats-Msg-Id of its publication: the delivery id, and
 * for a delivery published again (requeue) the id and a count, so that JetStream's duplicate
 * window does not drop it. They are marked published in the caller's transaction (the newest lane
 * alone: in one statement, takeNewest), which the relay commits before it publishes them: a
 * worker's claim of a delivery waits for no relay (it waited for the relay's commit, after every
 * publish of its pass was acknowledged). A publish that fails
 * puts its delivery back (putBackUnpublished); one a crash cuts short is published again by the
 * next relay to start (markedNotClaimed), or by the sweep (republishStranded).
 *
 * What is published: new deliveries (no retry due: next_attempt_at null), and deliveries waiting
 * in the outbox for a retry (next_attempt_at set: parked there by the worker because it is due
 * later than WEBHOOK_STREAM_WAIT_SECONDS, over its endpoint's share, or held back for a slot) once
 * it is due within publishAheadMs, soonest first; a pass takes them in three lanes (below). A
 * retry due later is not published: only what is due soon waits in JetStream, where each unacknowledged message counts against the consumer's
 * max_ack_pending (dispatch.ts settle). Each kind is read by a partial index of its own, so thousands of
 * retries waiting for hours cost a pass nothing.
 *
 * Each statement reads only the days it names (issue 50): the rows are taken from the days since
 * `since` (the relay passes its recent window, and now and then -infinity: every day), and marked
 * in the days the batch spans. As one statement (an update joined to its subquery) it was planned
 * against every day's partition, 60 ms a pass beside 90 days, where it took 8 on a new database.
 */
export async function takeUnpublished(
  em: EntityManager,
  batch: number,
  since: Date | "-infinity" = "-infinity",
  /**
   * `all` three lanes; `newest` the first alone (the whole batch, in one statement: takeNewest),
   * `rest` the other two: the relay runs `newest` in a loop of its own (relay.ts).
   */
  part: "all" | "newest" | "rest" = "all",
): Promise<Unpublished[]> {
  const after = since === "-infinity" ? since : since.toISOString();
  type Row = { id: string; created_at: Date | string };
  // Three lanes, so that no backlog holds up another's new deliveries for longer than a pass or
  // two: the newest new deliveries (a quarter of the batch), the retries due (up to half, three
  // quarters when no new ones wait), and the oldest new deliveries (the rest, at least a quarter).
  // Oldest first alone, 105 600 deliveries committed in 13 s kept another merchant's next ones
  // unpublished for 25 s, and 40 000 parked deliveries coming due together did the same for 16 s.
  // Receivers tolerate any order (docs/webhooks.md), and each backlog still drains oldest first. A
  // recovery's deliveries are left to the oldest lane: a recovery re-sends missed events in event
  // order, a page at a time, and is no one's new delivery waiting behind a flood.
  if (part === "newest") return takeNewest(em, batch, after);
  const newestShare = part === "rest" ? 0 : Math.ceil(batch / 4);
  const newest = newestShare === 0 ? [] : await em.execute<Row[]>(
    `select id, created_at from webhook_deliveries where published_at is null and next_attempt_at is null and created_at >= ?::timestamptz
        and cause <> 'recovery'
      order by created_at desc limit ? for update skip locked`,
    [after, newestShare],
  );
  const retries = await em.execute<Row[]>(
    `select id, created_at from webhook_deliveries
      where published_at is null and next_attempt_at is not null and created_at >= ?::timestamptz
        and next_attempt_at <= now() + make_interval(secs => ?)
      order by next_attempt_at limit ? for update skip locked`,
    // A quarter is always left for the oldest new deliveries (a recovery's among them).
    [after, publishAheadMs / 1000, batch - newest.length - Math.ceil(batch / 4)],
  );
  const oldest = await em.execute<Row[]>(
    `select id, created_at from webhook_deliveries where published_at is null and next_attempt_at is null and created_at >= ?::timestamptz
        and not (id = any(?::text[]))
      order by created_at limit ? for update skip locked`,
    [after, `{${newest.map((r) => r.id).join(",")}}`, batch - newest.length - retries.length],
  );
  const due = [...retries, ...newest, ...oldest];
  if (due.length === 0) return [];
  const times = due.map((r) => new Date(r.created_at).getTime());
  const rows = await em.execute<(UnpublishedRow & { created_at: Date | string })[]>(
    `update webhook_deliveries set published_at = now()
      where id = any(?::text[]) and created_at between ?::timestamptz and ?::timestamptz and published_at is null
      returning id, republished, created_at, merchant_id, endpoint_id, event_id, next_attempt_at`,
    [`{${due.map((r) => r.id).join(",")}}`, new Date(Math.min(...times)).toISOString(), new Date(Math.max(...times)).toISOString()],
  );
  // RETURNING keeps no order: published the retries due first, then new deliveries oldest first.
  const byAge = (a: Row, b: Row) => new Date(a.created_at).getTime() - new Date(b.created_at).getTime();
  const order = new Map([...retries, ...[...newest, ...oldest].sort(byAge)].map((r, i) => [r.id, i]));
  rows.sort((a, b) => (order.get(a.id) ?? 0) - (order.get(b.id) ?? 0));
  return rows.map(unpublishedOf);
}

/**
 * How far past this process's clock the newest lane looks for new deliveries: a writer's clock
 * may run a little ahead of the relay's. One further ahead is the other loop's (takeUnpublished
 * with no upper bound), on its next pass.
 */
const newestAheadMs = 3_600_000;

/**
 * The newest lane alone (takeUnpublished), taken and marked in one statement: the relay runs it
 * on its own, with no transaction around it, for each create's wake (relay.ts). It reads and
 * marks only the days from `after` to an hour from now, so the statement is planned against
 * those days' partitions, not every day's (above) nor the week made ahead (retention/partitions.ts):
 * those seven empty partitions, with their indexes, more than doubled its planning (0.44 against
 * 0.19 ms, measured on an idle database), and the relay plans it for each create's wake.
 * Returned oldest first.
 */
async function takeNewest(em: EntityManager, batch: number, after: string): Promise<Unpublished[]> {
  const before = new Date(Date.now() + newestAheadMs).toISOString();
  const rows = await em.execute<(UnpublishedRow & { created_at: Date | string })[]>(
    `with newest as (
       select id, created_at from webhook_deliveries where published_at is null and next_attempt_at is null
          and created_at >= ?::timestamptz and created_at < ?::timestamptz and cause <> 'recovery'
        order by created_at desc limit ? for update skip locked
     )
     update webhook_deliveries d set published_at = now()
       from newest where d.id = newest.id and d.created_at = newest.created_at and d.created_at >= ?::timestamptz and d.created_at < ?::timestamptz
     returning d.id, d.republished, d.created_at, d.merchant_id, d.endpoint_id, d.event_id, d.next_attempt_at`,
    [after, before, batch, after, before],
  );
  rows.sort((a, b) => new Date(a.created_at).getTime() - new Date(b.created_at).getTime());
  return rows.map(unpublishedOf);
}

/** A delivery a relay publishes: its message's id (Nats-Msg-Id), lane, endpoint and due time. */
export interface Unpublished {
  id: string;
  msgId: string;
  /** How many times it was sent back to the outbox: its message's id says so (a count on the id). */
  republished: number;
  merchantId: string;
  endpointId: string;
  eventId: string;
  dueAt: Date | undefined;
}

type UnpublishedRow = { id: string; republished: number; merchant_id: string; endpoint_id: string; event_id: string; next_attempt_at: Date | string | null };

function unpublishedOf(r: UnpublishedRow): Unpublished {
  return {
    id: r.id,
    msgId: r.republished > 0 ? `${r.id}.${r.republished}` : r.id,
    republished: r.republished,
    merchantId: r.merchant_id,
    endpointId: r.endpoint_id,
    eventId: r.event_id,
    dueAt: r.next_attempt_at === null ? undefined : new Date(r.next_attempt_at),
  };
}

/**
 * Deliveries whose publish failed after their mark committed (takeUnpublished): back in the
 * outbox, for a pass to publish under the same message id (a publish that timed out may have
 * reached the stream, and JetStream's duplicate window drops it then). Only those as the mark left
 * them: no attempt claimed since (such a publish did reach the stream) and not sent back and taken
 * again meanwhile (`republished` changed). Returns how many.
 */
export async function putBackUnpublished(em: EntityManager, deliveries: readonly Pick<Unpublished, "id" | "republished">[]): Promise<number> {
  if (deliveries.length === 0) return 0;
  const rows = await em.execute<{ id: string }[]>(
    `update webhook_deliveries d set published_at = null
       from unnest(?::text[], ?::int[]) as f(id, republished)
      where d.id = f.id and d.republished = f.republished and d.created_at between ?::timestamptz and ?::timestamptz
        and d.status = 'pending' and d.stream_seq is null and d.published_at is not null
      returning d.id`,
    [`{${deliveries.map((d) => d.id).join(",")}}`, `{${deliveries.map((d) => d.republished).join(",")}}`, ...createdAtRange(deliveries.map((d) => d.id))],
  );
  return rows.length;
}

/**
 * The deliveries marked published within `windowMs` that no attempt has claimed (at most `limit`,
 * the latest marks first): what a relay that died between its mark and its publish may have left
 * out of the stream, among those waiting in it for a worker. A relay publishes them again as it
 * starts, under their own message ids: JetStream drops those it has (`windowMs` is within its
 * duplicate window). Only deliveries of the last three days (the relay's recent window), so the
 * read stays in their partitions. A mark older, of an older delivery, or past the limit is the
 * sweep's (republishStranded).
 */
export async function markedNotClaimed(em: EntityManager, windowMs: number, limit: number): Promise<Unpublished[]> {
  const rows = await em.execute<UnpublishedRow[]>(
    `select id, republished, merchant_id, endpoint_id, event_id, next_attempt_at from webhook_deliveries
      where status = 'pending' and stream_seq is null and published_at >= now() - make_interval(secs => ?)
        and created_at >= now() - make_interval(days => 3)
      order by published_at desc limit ?`,
    [windowMs / 1000, limit],
  );
  return rows.map(unpublishedOf);
}

// ---- the worker ----

/**
 * A delivery's status in the worker's statements, written so that no index on status can drive
 * them: they find their rows by id. The planner's idea of how many deliveries are pending or
 * processing comes from the last ANALYZE, and a backlog (an outage, a burst) builds up long before
 * the next one: it would then read every pending or processing delivery through the status index
 * for each batch of 50, so a drain slowed down as the backlog it drains grew (100 000 queued
 * deliveries: 1 273/s against 2 834/s, PostgreSQL's CPU per delivery three times as high).
 */
const statusOf = (alias: string) => `coalesce(${alias}.status, '')`;

export interface Claimed {
  id: string;
  attempt: number;
  /** When the claim was made, as recorded (last_attempt_at): by the database's clock, the one every takeover and the sweep read it with. */
  claimedAt: Date;
  /**
   * This process's monotonic clock (performance.now()) just before the claim's statement was sent:
   * at or before the claim, however this process's wall clock is set. The attempt's request goes out
   * within sendWithinMs of it or never (dispatch.ts), so within sendWithinMs of the recorded claim.
   */
  claimSentAt: number;
  /** The status the delivery had before this claim: "processing" means a worker stopped mid-attempt. */
  previousStatus: DeliveryStatus;
  previousAttemptAt: Date | undefined;
  /** When its attempt was due (a claim may come up to earlyToleranceMs before). */
  dueAt: Date | undefined;
  eventId: string;
  endpointId: string;
  endpointUrl: string;
  endpointStatus: string;
  secretCiphertext: Buffer;
  /** The secret a rotation replaced and when it stops signing (unset: no overlap). */
  previousSecretCiphertext: Buffer | undefined;
  previousSecretExpiresAt: Date | undefined;
  payload: string;
  /** The event's created_at (the one in its payload). */
  eventCreatedAt: Date;
}

export type ClaimResult =
  | { claimed: Claimed }
  | { skipped: "unknown" | "finished" | "duplicate" }
  /** Another attempt of the delivery may still be running: it may be taken over `retryInMs` from now, not before. */
  | { skipped: "in_flight"; retryInMs: number }
  /** A message published again before the delivery's retry is due. */
  | { skipped: "early"; dueInMs: number };

/** A message this close to its delivery's due time is on time (worker clocks differ a little). */
export const earlyToleranceMs = 200;

export interface ClaimRequest {
  id: string;
  /** The JetStream message's stream sequence. */
  seq: number;
  /** The delivery's event, as its message names it (jetstream.ts eventHeader): read in the claim's statement. */
  eventId?: string;
}

/**
 * Ids as one PostgreSQL text[] literal, each quoted. A batch's statement names its rows by
 * `id = any(...)` beside its join on the batch, so the only scan of the primary key (id,
 * created_at) the planner can build enters it by id. Without it, taking the hour's rows for one
 * and the batch for 100, it read every delivery of the hour before the batch through the key,
 * for each batch (docs/performance.md).
 */
function idArray(ids: readonly string[]): string {
  return `{${ids.map((id) => `"${id.replace(/["\\]/g, "\\$&")}"`).join(",")}}`;
}

interface Statement {
  sql: string;
  params: unknown[];
}

/**
 * The largest batch a worker's claim or finish runs by key (onePartition). Its plan, made once,
 * searches the batch's array of ids again for each row: 4.5 ms for a claim of 50 where the plan
 * made for the batch takes 2.0 (docs/performance.md). A batch of a few is what a worker sees below
 * full load, and there planning each call was most of the statement's cost.
 */
const keyedBatchMax = 8;

/**
 * Runs a worker's statement over a small batch in the one partition of webhook_deliveries that
 * holds the batch's days, when one does (the usual batch: its deliveries made within the hour):
 * the partition named and its rows read by key, planned once per connection (executeByKey).
 * Otherwise (a batch of more than keyedBatchMax, across midnight or in the first hour of a day,
 * its ids of the older shape) through the parent table with the batch's days as conditions,
 * planned for each call (`replan`: a kept plan of the parent read whole days, docs/performance.md).
 * Planning each claim and finish was half of what PostgreSQL spent on them at 300 creates a
 * second, and a generic plan of the parent locks every day's partition at each call (98 with the
 * default retention). A partition dropped since this process read the layout is read through the parent.
 */
async function onePartition<I, T>(
  em: EntityManager,
  items: readonly I[],
  of: { id: (item: I) => string; key: (item: I) => string; row: (row: T) => string },
  keyed: (partition: string) => Statement | Promise<Statement>,
  parent: (items: readonly I[]) => Statement,
): Promise<T[]> {
  const range = createdAtRange(items.map(of.id));
  const partition = items.length <= keyedBatchMax ? await partitionHolding(em, "webhook_deliveries", range) : undefined;
  let rest = items;
  let rows: T[] = [];
  let gone = false;
  if (partition !== undefined) {
    const { sql, params } = await keyed(partition);
    try {
      rows = await executeByKey<T>(em, sql, params);
      // What the partition did not have is looked for through the parent table, which holds every
      // row whatever the layout: mostly a delivery another worker has (its row is there), and a
      // layout changed since this process read it (a day's rows no longer where it said).
      const found = new Set(rows.map(of.row));
      rest = items.filter((item) => !found.has(of.key(item)));
    } catch (err) {
      if ((err as { code?: unknown }).code !== "42P01") throw err;
      gone = true;
    }
    if (rest.length === 0) return rows;
  }
  const { sql, params } = parent(rest);
  const more = await executePrepared<T>(em, sql, params, { replan: true });
  if (gone || more.length > 0) {
    // The partition is gone, or did not hold rows it should have: read the layout again.
    forgetLayout(em, "webhook_deliveries");
    forgetLayout(em, "webhook_events");
  }
  return [...rows, ...more];
}

/**
 * Starts an attempt of each delivery for its JetStream message: moves it to
 * processing, counts the attempt and records which message owns it — for a whole
 * batch in one statement (rows locked in id order), with its events when every message names
 * its event (else they are read in a second).
 * A message of another sequence for the same delivery is a duplicate publish.
 * A delivery already processing is taken over only once its attempt was claimed at
 * least `takeoverAfterMs` ago, when it can no longer be running (its request went out
 * soon after the claim or never, and it ended at its timeout): a copy of the message
 * that comes sooner (its worker stalled past the ack deadline, or a server handed a
 * queued redelivery out twice) would POST the webhook a second time while the first
 * may still be answered. It is told when it may take over instead.
 *
 * Ownership is on one clock, PostgreSQL's: the claim records last_attempt_at with the database's
 * clock_timestamp() (the moment the row is locked and written, not the statement's start), and a
 * takeover compares it with clock_timestamp() again, so two workers' clocks are never compared
 * (measured on its own clock against another's claim, a worker 10 s ahead took over, with the
 * default 17 s, an attempt claimed 7 s before, its request still open). The sweep
 * (failAbandoned, republishStranded) reads last_attempt_at on that clock too. `at`, the worker's
 * clock, only places a retry's due time (next_attempt_at, which the finishing worker wrote on its
 * own clock): a claim up to earlyToleranceMs early waits for it, and no attempt is in flight then.
 */
export async function claimDeliveries(em: EntityManager, batch: readonly ClaimRequest[], at: Date, takeoverAfterMs: number): Promise<ClaimResult[]> {
  // The batch's days, so that the statement reads their partition only: by name and key when one
  // partition holds them all (onePartition), else through the parent table with the days as conditions.
  const idsLiteral = idArray(batch.map((b) => b.id));
  // The events' days likewise, when every message names its event: they are read in the same
  // statement. Joined without those days, the events were planned against every day's partition
  // (a replay's event may be older than its delivery).
  const eventIds = batch.every((b) => b.eventId !== undefined) ? batch.map((b) => b.eventId!) : undefined;
  const eventRange = eventIds ? createdAtRange(eventIds) : undefined;
  const claimSentAt = performance.now();
  type Row = {
    id: string;
    attempt_count: number;
    claimed_at: Date | string;
    previous_status: DeliveryStatus;
    previous_attempt_at: Date | string | null;
    due_at: Date | string | null;
    event_id: string;
    endpoint_id: string;
    url: string;
    endpoint_status: string;
    secret_ciphertext: Buffer;
    previous_secret_ciphertext: Buffer | null;
    previous_secret_expires_at: Date | string | null;
    payload: string | null;
    event_created_at: Date | string | null;
  };
  const inputOf = (sub: readonly ClaimRequest[]) => JSON.stringify(sub.map(({ id, seq }) => ({ id, seq })));
  const due = new Date(at.getTime() + earlyToleranceMs);
  // The batch's deliveries by id in `deliveries` (an array of their ids for every read: see
  // executeByKey); through the parent table, in the batch's days too (`inDays`, `ofId`, `updated`).
  const claimSql = (deliveries: string, inDays: string, ofId: string, updated: string, events: string) =>
    `with input as (
       select distinct on (id) id, seq from json_to_recordset(?::json) as i(id text, seq bigint)
     ), old as (
       select d.id, d.created_at, d.status, d.last_attempt_at, d.next_attempt_at, input.seq
         from ${deliveries} d join input on input.id = d.id${ofId}
        where d.id = any(?::text[])${inDays} and (d.stream_seq is null or d.stream_seq = input.seq)
          and ((${statusOf("d")} = 'pending' and (d.next_attempt_at is null or d.next_attempt_at <= ?))
               or (${statusOf("d")} = 'processing' and d.last_attempt_at <= clock_timestamp() - make_interval(secs => ?)))
        order by d.id
        for update of d
     ), claimed as (
       update ${deliveries} d
          set status = 'processing', attempt_count = d.attempt_count + 1, stream_seq = old.seq,
              last_attempt_at = clock_timestamp(), next_attempt_at = null, updated_at = clock_timestamp()
         from old where d.id = old.id and d.created_at = old.created_at${updated}
       returning d.id, d.attempt_count, d.last_attempt_at as claimed_at, old.status as previous_status, old.last_attempt_at as previous_attempt_at,
                 old.next_attempt_at as due_at, d.event_id, d.endpoint_id
     )
     select c.*, e.url, e.status as endpoint_status, e.secret_ciphertext, e.previous_secret_ciphertext, e.previous_secret_expires_at, ${events}`;
  const noEvents = `null::text as payload, null::timestamptz as event_created_at
       from claimed c join webhook_endpoints e on e.id = c.endpoint_id`;
  const parentStatement = (sub: readonly ClaimRequest[]): Statement => {
    const subIds = idArray(sub.map((b) => b.id));
    const subRange = createdAtRange(sub.map((b) => b.id));
    const subEvents = sub.every((b) => b.eventId !== undefined) ? createdAtRange(sub.map((b) => b.eventId!)) : undefined;
    return {
      sql: claimSql(
        "webhook_deliveries",
        " and d.created_at between ?::timestamptz and ?::timestamptz",
        ` and ${createdAtOfId("d.created_at", "input.id")}`,
        " and d.id = any(?::text[]) and d.created_at between ?::timestamptz and ?::timestamptz",
        subEvents
          ? `ev.payload, ev.created_at as event_created_at
       from claimed c join webhook_endpoints e on e.id = c.endpoint_id
       left join webhook_events ev on ev.id = c.event_id and ev.created_at between ?::timestamptz and ?::timestamptz`
          : noEvents,
      ),
      params: [inputOf(sub), subIds, ...subRange, due, takeoverAfterMs / 1000, subIds, ...subRange, ...(subEvents ?? [])],
    };
  };
  // A row another claim changed while this one waited for its lock is checked again as changed,
  // clock_timestamp() read anew: the takeover is measured from that claim, after the wait.
  const rows = await onePartition<ClaimRequest, Row>(
    em,
    batch,
    { id: (b) => b.id, key: (b) => b.id, row: (r) => r.id },
    async (deliveries) => {
      const events = eventIds && eventRange ? await partitionHolding(em, "webhook_events", eventRange) : undefined;
      return {
        sql: claimSql(
          deliveries,
          "",
          "",
          " and d.id = any(?::text[])",
          events
            ? `ev.payload, ev.created_at as event_created_at
       from claimed c join webhook_endpoints e on e.id = c.endpoint_id
       left join ${events} ev on ev.id = c.event_id and ev.id = any(?::text[])`
            : noEvents,
        ),
        params: [inputOf(batch), idsLiteral, due, takeoverAfterMs / 1000, idsLiteral, ...(events ? [idArray(eventIds!)] : [])],
      };
    },
    parentStatement,
  );
  // The events the statement did not read (a message that names none, or not the delivery's), in a
  // statement of their own, in the days their ids name.
  const unread = [...new Set(rows.filter((r) => r.payload === null).map((r) => r.event_id))];
  const events =
    unread.length === 0
      ? []
      : await em.execute<{ id: string; payload: string; created_at: Date | string }[]>(
          `select id, payload, created_at from webhook_events where id = any(?::text[]) and created_at between ?::timestamptz and ?::timestamptz`,
          [`{${unread.join(",")}}`, ...createdAtRange(unread)],
        );
  const eventOf = new Map(events.map((e) => [e.id, e]));
  const claimed = new Map(rows.flatMap((r) => {
    const ev = r.payload !== null && r.event_created_at !== null ? { payload: r.payload, created_at: r.event_created_at } : eventOf.get(r.event_id);
    return ev ? [[r.id, { ...r, payload: ev.payload, event_created_at: ev.created_at }] as const] : [];
  }));
  const missing = batch.filter((b) => !claimed.has(b.id)).map((b) => b.id);
  type Found = { id: string; status: DeliveryStatus; stream_seq: string | number | null; next_attempt_at: Date | string | null; takeover_in_ms: number | string | null };
  const existing = new Map<string, Found>();
  if (missing.length > 0) {
    // How long until the attempt in flight may be taken over, on the database's clock as the claim measures it.
    const found = await em.execute<Found[]>(
      `select id, status, stream_seq, next_attempt_at,
              ceil(extract(epoch from last_attempt_at + make_interval(secs => ?) - clock_timestamp()) * 1000)::float8 as takeover_in_ms
         from webhook_deliveries where id in (?)`,
      [takeoverAfterMs / 1000, missing],
    );
    for (const f of found) existing.set(f.id, f);
  }
  const given = new Set<string>();
  return batch.map((b): ClaimResult => {
    const r = claimed.get(b.id);
    // A batch holding two copies of one message: the first gets the attempt.
    if (r && !given.has(b.id)) {
      given.add(b.id);
      return {
        claimed: {
          id: r.id,
          attempt: r.attempt_count,
          claimedAt: new Date(r.claimed_at),
          claimSentAt,
          previousStatus: r.previous_status,
          previousAttemptAt: r.previous_attempt_at ? new Date(r.previous_attempt_at) : undefined,
          dueAt: r.due_at ? new Date(r.due_at) : undefined,
          eventId: r.event_id,
          endpointId: r.endpoint_id,
          endpointUrl: r.url,
          endpointStatus: r.endpoint_status,
          secretCiphertext: r.secret_ciphertext,
          previousSecretCiphertext: r.previous_secret_ciphertext ?? undefined,
          previousSecretExpiresAt: r.previous_secret_expires_at ? new Date(r.previous_secret_expires_at) : undefined,
          payload: r.payload,
          eventCreatedAt: new Date(r.event_created_at),
        },
      };
    }
    if (r) return { skipped: "in_flight", retryInMs: takeoverAfterMs };
    const e = existing.get(b.id);
    if (!e) return { skipped: "unknown" };
    if (e.status === "delivered" || e.status === "failed") return { skipped: "finished" };
    if (e.stream_seq !== null && Number(e.stream_seq) !== b.seq) return { skipped: "duplicate" };
    if (e.status === "pending" && e.next_attempt_at !== null) return { skipped: "early", dueInMs: Math.max(1, new Date(e.next_attempt_at).getTime() - at.getTime()) };
    // Processing (or pending, claimed by another copy since this claim's statement): the attempt's claim is its start.
    return { skipped: "in_flight", retryInMs: e.takeover_in_ms === null ? takeoverAfterMs : Math.max(1, Number(e.takeover_in_ms)) };
  });
}

/** Records an attempt whose worker stopped before it could record an outcome. */
export async function recordLostAttempt(em: EntityManager, deliveryId: string, number: number, startedAt: Date): Promise<void> {
  await em.execute(
    `insert into webhook_attempts (delivery_id, number, started_at, error, outcome, delivery_time) values (?, ?, ?, 'worker_lost', 'unknown', ${deliveryTimeOf("?")})
     on conflict do nothing`,
    [deliveryId, number, startedAt, deliveryId],
  );
}

export interface AttemptRecord {
  deliveryId: string;
  number: number;
  startedAt: Date;
  durationMs: number;
  statusCode: number | undefined;
  error: string | undefined;
  outcome: Outcome;
  excerpt: string | undefined;
  /** The delivery's state after this attempt. */
  status: "delivered" | "pending" | "failed";
  nextAttemptAt: Date | undefined;
  lastError: string | undefined;
}

/**
 * Moves each delivery on and records its attempt — a whole batch in one statement.
 * Nothing is written for a delivery another worker has taken over meanwhile;
 * returns, per record, whether it was written.
 *
 * The finish wins over the sweep. A last attempt the sweep ended as abandoned (failAbandoned:
 * failed, worker_lost, its attempt count still this attempt's) may still have been answered: its
 * worker lost the database, not the receiver, and holds the answer until its finish is written
 * (persist() retries it through the outage). The sweep cannot check the outcome first, since until
 * then the answer exists nowhere but in that worker's memory; so the attempt's own record replaces
 * the sweep's guess when it ends the delivery (delivered, or failed with what the receiver said), and
 * a 2xx is never left recorded as failed. The sweep's traces go with it: its lost attempt is this
 * attempt's row (same delivery and number), overwritten in place, so no attempt is counted twice;
 * auto-disable reads the delivery's status and attempts as they are at each pass, so the delivery
 * counts as the endpoint's last success from then on and the abandonment toward nothing; the
 * message the sweep removed from the stream is acknowledged for nothing. A record that would leave
 * the delivery pending (a worker configured with more attempts) does not reopen it.
 */
export async function finishAttempts(em: EntityManager, batch: readonly AttemptRecord[]): Promise<boolean[]> {
  const inputOf = (sub: readonly AttemptRecord[]) => JSON.stringify(sub.map((a) => ({
    id: a.deliveryId,
    number: a.number,
    status: a.status,
    started_at: a.startedAt.toISOString(),
    duration_ms: a.durationMs,
    status_code: a.statusCode ?? null,
    error: a.error ?? null,
    outcome: a.outcome,
    excerpt: a.excerpt ?? null,
    next_attempt_at: a.nextAttemptAt?.toISOString() ?? null,
    last_error: a.lastError ?? null,
  })));
  // The batch's deliveries by the array of their ids in `deliveries`; through the parent table, in the batch's days too (`inDays`).
  const finishSql = (deliveries: string, inDays: string) =>
    `with input as (
       select * from json_to_recordset(?::json) as i(id text, number int, status text, started_at timestamptz, duration_ms int,
         status_code int, error text, outcome text, excerpt text, next_attempt_at timestamptz, last_error text)
     ), moved as (
       update ${deliveries} d
          set status = input.status, next_attempt_at = input.next_attempt_at, last_status_code = input.status_code,
              last_error = input.last_error, last_attempt_at = input.started_at, updated_at = now()
         from input where d.id = input.id and d.id = any(?::text[])${inDays}
          and d.attempt_count = input.number
          and (${statusOf("d")} = 'processing' or (${statusOf("d")} = 'failed' and d.last_error = 'worker_lost' and input.status <> 'pending'))
       returning d.id, input.number
     )
     insert into webhook_attempts (delivery_id, number, started_at, duration_ms, status_code, error, outcome, response_excerpt, delivery_time)
     select input.id, input.number, input.started_at, input.duration_ms, input.status_code, input.error, input.outcome, input.excerpt, ${deliveryTimeOf("input.id")}
       from input join moved on moved.id = input.id and moved.number = input.number
     on conflict (delivery_id, number, delivery_time) do update set started_at = excluded.started_at, duration_ms = excluded.duration_ms,
       status_code = excluded.status_code, error = excluded.error, outcome = excluded.outcome, response_excerpt = excluded.response_excerpt
     returning delivery_id, number`;
  const idsOf = (sub: readonly AttemptRecord[]) => sub.map((a) => a.deliveryId);
  const rows = await onePartition<AttemptRecord, { delivery_id: string; number: number }>(
    em,
    batch,
    { id: (a) => a.deliveryId, key: (a) => `${a.deliveryId}/${a.number}`, row: (r) => `${r.delivery_id}/${r.number}` },
    (deliveries) => ({ sql: finishSql(deliveries, ""), params: [inputOf(batch), idArray(idsOf(batch))] }),
    (sub) => ({
      sql: finishSql("webhook_deliveries", ` and ${createdAtOfId("d.created_at", "input.id")} and d.created_at between ?::timestamptz and ?::timestamptz`),
      params: [inputOf(sub), idArray(idsOf(sub)), ...createdAtRange(idsOf(sub))],
    }),
  );
  const written = new Set(rows.map((r) => `${r.delivery_id}/${r.number}`));
  return batch.map((a) => written.has(`${a.deliveryId}/${a.number}`));
}

/** Ends a claimed delivery without an HTTP attempt (its endpoint was disabled meanwhile). */
export async function failClaimed(em: EntityManager, id: string, reason: string): Promise<void> {
  await em.execute(
    `update webhook_deliveries set status = 'failed', last_error = ?, next_attempt_at = null, updated_at = now() where id = ? and ${createdAtOfId("created_at", "?")}`,
    [reason, id, id, id],
  );
}

/**
 * Deliveries whose worker stopped during the last allowed attempt: JetStream
 * will not redeliver them, so they end failed (worker_lost) once the attempt
 * has certainly ended (`staleAfterMs` past its claim, both on the database's clock:
 * see claimDeliveries). Returns their stream sequences, so their messages can be
 * removed from the stream. A worker that was only cut off from the database may
 * still hold the attempt's answer: its finish, when it lands, replaces this
 * (finishAttempts), so an answered attempt ends as it was answered.
 */
export async function failAbandoned(em: EntityManager, maxAttempts: number, staleAfterMs: number): Promise<number[]> {
  const rows = await em.execute<{ id: string; attempt_count: number; last_attempt_at: Date; stream_seq: string | number | null }[]>(
    `update webhook_deliveries set status = 'failed', last_error = 'worker_lost', updated_at = now()
      where status = 'processing' and attempt_count >= ? and last_attempt_at < clock_timestamp() - make_interval(secs => ?)
      returning id, attempt_count, last_attempt_at, stream_seq`,
    [maxAttempts, staleAfterMs / 1000],
  );
  for (const r of rows) await recordLostAttempt(em, r.id, r.attempt_count, new Date(r.last_attempt_at));
  return rows.flatMap((r) => (r.stream_seq === null ? [] : [Number(r.stream_seq)]));
}

/** Back to the outbox: the relay publishes the delivery again as a new message (see takeUnpublished). */
const backToOutbox = `published_at = null, stream_seq = null, republished = republished + 1, updated_at = now()`;

/**
 * Deliveries overdue by `strandedAfterMs` — a pending delivery whose retry (or first attempt)
 * never came, or an attempt in flight far past its deadline with attempts left — go back to the
 * outbox, to be published as a new message: their JetStream message was lost, or has no
 * delivery left. Returns the old messages' stream sequences, to be removed.
 */
export async function republishStranded(em: EntityManager, maxAttempts: number, strandedAfterMs: number, timeoutMs: number): Promise<number[]> {
  const rows = await em.execute<{ stream_seq: string | number | null }[]>(
    `with stranded as (
       select id, created_at, stream_seq from webhook_deliveries
        where published_at is not null and (
          (status = 'pending' and coalesce(next_attempt_at, published_at) < now() - make_interval(secs => ?))
          or (status = 'processing' and attempt_count < ? and last_attempt_at < now() - make_interval(secs => ?)))
        for update skip locked
     )
     update webhook_deliveries d set ${backToOutbox}
       from stranded where d.id = stranded.id and d.created_at = stranded.created_at
     returning stranded.stream_seq`,
    [strandedAfterMs / 1000, maxAttempts, (strandedAfterMs + timeoutMs) / 1000],
  );
  return rows.flatMap((r) => (r.stream_seq === null ? [] : [Number(r.stream_seq)]));
}

/**
 * A statement that puts deliveries back in the outbox (`update ... returning id`), made to wake the
 * relay at its commit as an insert does (the outbox trigger fires on inserts only): otherwise the
 * delivery waits for the relay's next poll, up to a second, which a retry due sooner cannot afford.
 */
const waking = (update: string) => `with back as (${update}) select id, pg_notify('webhook_outbox', '') from back`;

/** Puts a pending delivery back in the outbox, to be published as a new message; whether it was pending. */
export async function requeue(em: EntityManager, id: string): Promise<boolean> {
  const rows = await em.execute<{ id: string }[]>(
    waking(`update webhook_deliveries set ${backToOutbox} where id = ? and ${createdAtOfId("created_at", "?")} and status = 'pending' returning id`),
    [id, id, id],
  );
  return rows.length > 0;
}

/** A delivery held back by its endpoint's limit, to come again `waitMs` from now. */
export interface HeldBackRequest extends ClaimRequest {
  waitMs: number;
}

/**
 * Puts deliveries held back by their endpoints' limits (no attempt made, the message `seq` its own
 * or none yet) back in the outbox, parked until their turn (next_attempt_at, `waitMs` from now:
 * the relay publishes each when due, as it does a retry's): each new message comes at the end of
 * the stream, with JetStream's delivery count starting over. One statement for a batch: an
 * endpoint that turns out slow sends back its whole backlog at once, and one write each would keep
 * the pool from the claims of every other endpoint's deliveries. Whether each was still pending, in order.
 */
export async function requeueHeldBack(em: EntityManager, held: readonly HeldBackRequest[]): Promise<boolean[]> {
  const rows = await executePrepared<{ id: string }>(
    em,
    waking(`update webhook_deliveries d set ${backToOutbox},
             next_attempt_at = case when h.wait_ms > 0 then greatest(coalesce(d.next_attempt_at, now()), now() + make_interval(secs => h.wait_ms / 1000.0)) else d.next_attempt_at end
        from unnest(?::text[], ?::bigint[], ?::int[]) as h(id, seq, wait_ms)
       where d.id = h.id and ${createdAtOfId("d.created_at", "h.id")} and d.created_at between ?::timestamptz and ?::timestamptz
         and d.status = 'pending' and d.published_at is not null and (d.stream_seq is null or d.stream_seq = h.seq)
       returning d.id`),
    [held.map((h) => h.id), held.map((h) => h.seq), held.map((h) => Math.max(0, Math.round(h.waitMs))), ...createdAtRange(held.map((h) => h.id))],
    // Planned for each batch with the table's size of the moment (see executePrepared).
    { replan: true },
  );
  const back = new Set(rows.map((r) => r.id));
  return held.map((h) => back.has(h.id));
}

/**
 * An attempt a stopping worker gave up on (still running when its time to stop ran out): recorded
 * as lost (outcome unknown, error worker_lost), and the delivery goes on as after a retryable
 * outcome: pending, due `waitMs` from now, back in the outbox to be published again as a new
 * message; or failed when it was the last attempt. Nothing is written when the delivery is no
 * longer this attempt's. Returns whether it was written.
 */
export async function giveUpAttempt(em: EntityManager, deliveryId: string, number: number, startedAt: Date, last: boolean, waitMs: number): Promise<boolean> {
  return em.transactional(async (tx) => {
    const rows = await tx.execute<{ id: string }[]>(
      last
        ? `update webhook_deliveries set status = 'failed', last_error = 'worker_lost', next_attempt_at = null, updated_at = now()
            where id = ? and ${createdAtOfId("created_at", "?")} and status = 'processing' and attempt_count = ? returning id`
        : waking(`update webhook_deliveries set status = 'pending', last_error = 'worker_lost', next_attempt_at = now() + make_interval(secs => ?),
                  last_status_code = null, ${backToOutbox}
            where id = ? and ${createdAtOfId("created_at", "?")} and status = 'processing' and attempt_count = ? returning id`),
      last ? [deliveryId, deliveryId, deliveryId, number] : [waitMs / 1000, deliveryId, deliveryId, deliveryId, number],
    );
    if (rows.length === 0) return false;
    await recordLostAttempt(tx, deliveryId, number, startedAt);
    return true;
  });
}
