import type { Owner } from "../auth/keys.ts";
import type { CursorCodec } from "../platform/cursor.ts";
import type { EntityManager } from "../platform/db.ts";
import { findOwned, pageOwned, type OwnedPage, type OwnedRow } from "../platform/owned.ts";
import { eventsKeptPastRetention, eventsWithUnfinishedDelivery, hasUnfinishedDelivery, isUnfinished, retentionCutoff, unfinishedSql, withinRetention } from "../events/retention.ts";
import { newTimedId } from "../platform/ids.ts";
import { createdAtOfId, createdAtRange } from "../platform/time-partitions.ts";
import { insertPendingDeliveries } from "../delivery/webhook-deliveries.ts";
import type { DeliveryCause, DeliveryStatus } from "../vocabulary/delivery-status.ts";

/** Deliveries and their attempts as merchants and ops read them, and replays (made by delivery/webhook-deliveries.ts, the tables' one writer). */

export interface DeliveryRow {
  id: string;
  event_id: string;
  event_type: string;
  endpoint_id: string;
  status: DeliveryStatus;
  attempt_count: number;
  next_attempt_at: Date | string | null;
  last_attempt_at: Date | string | null;
  last_status_code: number | null;
  last_error: string | null;
  replay_of: string | null;
  /** Why it was made: its event, a replay, or a recovery (vocabulary/delivery-status.ts). */
  cause: DeliveryCause;
  created_at: Date | string;
}

export interface AttemptRow {
  delivery_id: string;
  number: number;
  started_at: Date | string;
  duration_ms: number | null;
  status_code: number | null;
  error: string | null;
  outcome: string | null;
  response_excerpt: string | null;
}

const deliveryOwnColumns = `d.id, d.event_id, d.endpoint_id, d.status, d.attempt_count,
  d.next_attempt_at, d.last_attempt_at, d.last_status_code, d.last_error, d.replay_of, d.cause, d.created_at`;
const deliveryColumns = `${deliveryOwnColumns}, ev.type as event_type`;

/**
 * The delivery `d`'s event as `ev`, read in its own day's partition only: a lateral lookup for each
 * delivery (a page, one row), where a join would be planned against every day's events and could
 * read them all. `lock`: its key-share lock.
 */
const eventOf = (lock = "") =>
  `cross join lateral (select ev.id, ev.type, ev.created_at from webhook_events ev where ev.id = d.event_id and ${createdAtOfId("ev.created_at", "d.event_id")} limit 1${lock}) ev`;

/** A delivery as findDelivery reads it: also whether its event is within EVENT_RETENTION (only then can it be replayed). */
export interface FoundDelivery extends DeliveryRow {
  event_within_retention: boolean;
}

/**
 * The owner's delivery, if its event is kept (events/retention.ts: within EVENT_RETENTION, or kept
 * with all its deliveries by one that has not ended). In two steps, as findEventPayload: only a
 * delivery of an event past retention has its event's other deliveries looked at. `keepEvent` (in
 * a transaction that adds a delivery of the event, a replay): the event is locked against removal
 * until the transaction ends, and one being removed meanwhile is waited for and then absent, so
 * the insert never meets a missing event (a foreign-key error, a 500) where the answer is 404.
 */
export async function findDelivery(em: EntityManager, owner: Owner, id: string, retentionSeconds: number, keepEvent = false): Promise<FoundDelivery | undefined> {
  const lock = keepEvent ? " for key share" : "";
  const row = await findOwned<FoundDelivery & OwnedRow>(
    em,
    `select ${deliveryColumns}, ${withinRetention("ev", retentionSeconds)} as event_within_retention, d.merchant_id, d.environment
       from webhook_deliveries d ${eventOf(lock)} where d.id = ? and ${createdAtOfId("d.created_at", "?")}`,
    id,
    owner,
  );
  if (!row) return undefined;
  // Past retention: kept while it, or any other delivery of its event, has not ended.
  if (!row.event_within_retention && !isUnfinished(row.status) && !(await hasUnfinishedDelivery(em, row.event_id))) return undefined;
  const { merchant_id: _, environment: __, ...delivery } = row;
  return delivery;
}

export interface DeliveryFilters {
  endpointId?: string;
  eventId?: string;
  status?: string;
}

/** Slack for the clocks of this process and the database when a bound is given to prune days by (the exact bound is the database's). */
const clockSlackMs = 86_400_000;

/**
 * A page of the owner's deliveries kept under EVENT_RETENTION (events/retention.ts: a delivery is
 * kept exactly when its event is), newest first; a cursor is bound to the owner and the filters.
 * Each step is planned only for the days it reads: the page of deliveries (their table alone, in
 * the last day, week, five weeks, then all), then their events by id in the days the page spans,
 * then, for an event past retention only, whether a delivery of it has not ended. A delivery of an
 * event that is not kept is left out, and the page made up from the next deliveries.
 *
 * The page's own statement lets through what can be kept without reading other rows: deliveries
 * made within retention (an event is no newer than its delivery) and those not ended. An ended
 * delivery from before the cutoff is kept only with an event that one not ended keeps: once a page
 * reaches past the cutoff and such rows exist, those events are looked up and the page read again
 * letting their deliveries through. A page of recent deliveries costs nothing more.
 */
export async function listDeliveries(
  em: EntityManager,
  cursors: CursorCodec,
  owner: Owner,
  f: DeliveryFilters,
  page: { cursor: string | undefined; limit: number; binding: string },
  retentionSeconds: number,
): Promise<OwnedPage<DeliveryRow>> {
  const filters: [string, unknown][] = [];
  if (f.endpointId !== undefined) filters.push(["d.endpoint_id = ?", f.endpointId]);
  if (f.eventId !== undefined) filters.push(["d.event_id = ?", f.eventId]);
  if (f.status !== undefined) filters.push(["d.status = ?", f.status]);
  const cutoff = retentionCutoff(retentionSeconds);
  const mayBeKept = `(d.created_at > ${cutoff} or d.status in ${unfinishedSql})`;

  /** The page, letting through besides mayBeKept the deliveries of `kept` (events past retention that a delivery not ended keeps). */
  const read = async (kept: readonly string[]): Promise<{ page: OwnedPage<DeliveryRow>; reachedCutoff: boolean }> => {
    const rows: DeliveryRow[] = [];
    let reachedCutoff = false;
    let cursor = page.cursor;
    for (;;) {
      const part = await pageOwned<Omit<DeliveryRow, "event_type"> & { recent: boolean }>(em, cursors, {
        select: `select ${deliveryOwnColumns}, d.created_at > ${cutoff} as recent from webhook_deliveries d`,
        alias: "d",
        owner,
        filters: kept.length === 0 ? filters : [...filters, [`(${mayBeKept} or d.event_id = any(?::text[]))`, `{${kept.join(",")}}`]],
        conditions: kept.length === 0 ? [mayBeKept] : [],
        windowsDays: [1, 7, 35],
        binding: page.binding,
        cursor,
        limit: page.limit - rows.length,
      });
      if (!part.hasMore || part.rows.some((d) => !d.recent)) reachedCutoff = true;
      const events = await eventsOf(em, part.rows.map((d) => d.event_id), retentionSeconds);
      const old = [...events].filter(([, e]) => !e.recent).map(([id]) => id);
      const stillKept = await eventsWithUnfinishedDelivery(em, old);
      for (const { recent: _, ...d } of part.rows) {
        const ev = events.get(d.event_id);
        if (ev && (ev.recent || stillKept.has(d.event_id))) rows.push({ ...d, event_type: ev.type });
      }
      if (!part.hasMore || rows.length >= page.limit) return { page: { rows, hasMore: part.hasMore, nextCursor: part.nextCursor }, reachedCutoff };
      cursor = part.nextCursor;
    }
  };

  const first = await read([]);
  if (!first.reachedCutoff || !(await endedBeforeCutoff(em, owner, filters, cutoff, retentionSeconds))) return first.page;
  const kept = await eventsKeptPastRetention(em, owner, retentionSeconds, f.eventId);
  return kept.length === 0 ? first.page : (await read(kept)).page;
}

/**
 * Whether the owner has, under the filters, an ended delivery from before the retention's cutoff
 * (one the list's page statement leaves out). Bounded below the cutoff by this process's clock
 * too, with a day's slack, so that PostgreSQL plans it for the few days past retention alone.
 */
async function endedBeforeCutoff(em: EntityManager, owner: Owner, filters: readonly [string, unknown][], cutoff: string, retentionSeconds: number): Promise<boolean> {
  const [row] = await em.execute<{ found: boolean }[]>(
    `select exists (select 1 from webhook_deliveries d
      where d.merchant_id = ? and d.environment = ? ${filters.map(([clause]) => `and ${clause}`).join(" ")}
        and d.created_at <= ? and d.created_at <= ${cutoff} and d.status not in ${unfinishedSql}) as found`,
    [owner.merchantId, owner.environment, ...filters.map(([, value]) => value), new Date(Date.now() - retentionSeconds * 1000 + clockSlackMs)],
  );
  return row?.found === true;
}

/** The events of these ids (their type; recent: within EVENT_RETENTION), read in the days the ids name. */
async function eventsOf(em: EntityManager, ids: readonly string[], retentionSeconds: number): Promise<Map<string, { type: string; recent: boolean }>> {
  if (ids.length === 0) return new Map();
  const found = await em.execute<{ id: string; type: string; recent: boolean }[]>(
    `select id, type, ${withinRetention("webhook_events", retentionSeconds)} as recent from webhook_events
      where id = any(?::text[]) and created_at between ?::timestamptz and ?::timestamptz`,
    // An array literal: ids are letters, digits and "_" (knex would spread a JS array into a list).
    [`{${[...new Set(ids)].join(",")}}`, ...createdAtRange(ids)],
  );
  return new Map(found.map((e) => [e.id, { type: e.type, recent: e.recent }]));
}

/**
 * The newest deliveries of every merchant, for ops (the ops CLI). Only delivery and event
 * columns: nothing of the endpoint (its signing secret) is read.
 */
export async function listDeliveriesForOps(em: EntityManager, f: { status?: string; merchant?: string; limit: number }): Promise<Record<string, unknown>[]> {
  const where: string[] = [];
  const params: unknown[] = [];
  for (const [column, value] of [["d.status", f.status], ["d.merchant_id", f.merchant]] as const) {
    if (value === undefined) continue;
    where.push(`${column} = ?`);
    params.push(value);
  }
  return em.execute<Record<string, unknown>[]>(
    `select d.id, d.merchant_id, d.environment, d.endpoint_id, d.event_id, ev.type as event_type, d.status, d.cause, d.attempt_count,
            d.last_status_code, d.last_error, d.last_attempt_at, d.next_attempt_at, d.created_at
       from webhook_deliveries d ${eventOf()}
      ${where.length ? `where ${where.join(" and ")}` : ""}
      order by d.created_at desc, d.id desc limit ?`,
    [...params, f.limit],
  );
}

/** The attempts of these deliveries, read in the days their ids name (an attempt is kept in its delivery's day). */
export async function attemptsOf(em: EntityManager, deliveryIds: readonly string[]): Promise<AttemptRow[]> {
  if (deliveryIds.length === 0) return [];
  // The deliveries' days hold their attempts; an id of the older shape has them in the legacy partition (delivery_time -infinity).
  const [from, to] = createdAtRange(deliveryIds);
  return em.execute<AttemptRow[]>(
    `select delivery_id, number, started_at, duration_ms, status_code, error, outcome, response_excerpt
       from webhook_attempts where delivery_id in (?) and delivery_time between ?::timestamptz and ?::timestamptz order by delivery_id, number`,
    [deliveryIds, from, to],
  );
}

/**
 * A new pending delivery of the same event (the same bytes) to the same endpoint for each
 * original, replay_of it, with the original's merchant and environment; returns their ids in
 * the originals' order. The replay route and the operator's recovery of failed deliveries both
 * insert through here: each a delivery made by pendingDeliveries with the cause `replay`.
 * An original whose event is past EVENT_RETENTION gets none (and no id back): a delivery not ended
 * keeps its event past retention (events/retention.ts), so a replay made then would keep it, and
 * its day's partitions, as long as replays went on; past retention it ends with the deliveries
 * already under way. So does an original the retention job removed meanwhile, with its event:
 * each event is locked against removal as its replay is inserted (a removal under way is waited
 * for), so the insert never meets a missing event.
 */
export async function insertReplays(em: EntityManager, originalIds: readonly string[], at: Date, retentionSeconds: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < originalIds.length; i += 1000) {
    const input = originalIds.slice(i, i + 1000).map((original) => ({ id: newTimedId("wd", at), original }));
    const inserted = await insertPendingDeliveries(
      em,
      "replay",
      {
        id: "i.id",
        merchantId: "d.merchant_id",
        environment: "d.environment",
        eventId: "d.event_id",
        endpointId: "d.endpoint_id",
        replayOf: "d.id",
        createdAt: "?",
        updatedAt: "?",
        from: `from json_to_recordset(?::json) as i(id text, original text)
         cross join lateral (select d.* from webhook_deliveries d where d.id = i.original and ${createdAtOfId("d.created_at", "i.original")} limit 1) d
         ${eventOf(" for key share")}
        where ${withinRetention("ev", retentionSeconds)}`,
      },
      [at, at, JSON.stringify(input)],
    );
    const made = new Set(inserted);
    ids.push(...input.filter((x) => made.has(x.id)).map((x) => x.id));
  }
  return ids;
}
