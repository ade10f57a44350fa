import type { ConnectError } from "@connectrpc/connect";
import type { EntityManager } from "../platform/db.ts";
import { apiError } from "../platform/errors.ts";
import type { RowOwner } from "../platform/owned.ts";
import { isUnfinished, unfinishedDeliveryStatuses, unfinishedSql } from "../vocabulary/delivery-status.ts";

/**
 * EVENT_RETENTION on read (the rule: docs/webhooks.md, "Retention"). An event and its deliveries
 * are kept, or gone, together: an event is kept while it is within the retention, or while one of
 * its deliveries has not ended (pending, a retry waiting included, or processing); then it and
 * every delivery of it answer as before. Once neither holds, all of them are gone for the API at
 * once (404, out of the deliveries list), whatever the retention job has removed yet, so what a
 * merchant sees never depends on the job's timing, nor on which of an event's deliveries is asked
 * for. A replay (replayPastRetention) is refused past the retention: only within it can a delivery that
 * has not ended be added, so an event outlives its retention by at most its last deliveries' retries.
 */

/** The default EVENT_RETENTION, in seconds (90 days). */
export const defaultEventRetentionSeconds = 90 * 86_400;

// Which delivery statuses have not ended is the statuses' own vocabulary; the rule above is built on it.
export { isUnfinished, unfinishedDeliveryStatuses, unfinishedSql };

/** The retention as SQL: a whole number of seconds from validated config, written in (prepared statements stay one per process). */
export function retentionCutoff(retentionSeconds: number): string {
  if (!Number.isSafeInteger(retentionSeconds) || retentionSeconds <= 0) throw new Error(`event retention must be a positive whole number of seconds, got ${retentionSeconds}`);
  return `now() - make_interval(secs => ${retentionSeconds})`;
}

/** SQL condition: the event aliased `ev` is within retention (only then can it be replayed). */
export function withinRetention(ev: string, retentionSeconds: number): string {
  return `${ev}.created_at > ${retentionCutoff(retentionSeconds)}`;
}

/**
 * SQL condition: the event aliased `ev` is kept (within retention, or one of its deliveries has not
 * ended). Its deliveries are kept exactly when it is. The subquery reads every day's deliveries:
 * for a statement over many events (the dashboard's history of one intent); a read of one goes in
 * two steps (findEventPayload, findDelivery).
 */
export function eventKept(ev: string, retentionSeconds: number): string {
  return `(${withinRetention(ev, retentionSeconds)}
    or exists (select 1 from webhook_deliveries kept where kept.event_id = ${ev}.id and kept.status in ${unfinishedSql}))`;
}

/**
 * The refusal of a replay of an event past retention (its delivery still answers, kept by one
 * under way): a 409, as the request is well formed and the event's age refuses it, for good.
 */
export function replayPastRetention(eventId: string): ConnectError {
  return apiError(
    "invalid_state",
    `Webhook event ${eventId} is past its retention (EVENT_RETENTION): it and its deliveries are kept only until those still under way end, and it can no longer be replayed.`,
    "delivery_id",
  );
}

/** The earliest time an operator's recovery may reach back to: nothing before the retention is sent again (its event is gone, or about to be). */
export function retainedSince(since: Date, retentionSeconds: number, now: Date): Date {
  return new Date(Math.max(since.getTime(), now.getTime() - retentionSeconds * 1000));
}

/**
 * Which of these events have a delivery that has not ended (so are kept past retention). Asked
 * only of events already past it: the statement reads every day's deliveries (by event id).
 */
export async function eventsWithUnfinishedDelivery(em: EntityManager, eventIds: readonly string[]): Promise<Set<string>> {
  const ids = [...new Set(eventIds)];
  if (ids.length === 0) return new Set();
  const rows = await em.execute<{ event_id: string }[]>(
    // An array literal: ids are letters, digits and "_" (knex would spread a JS array into a list).
    `select distinct event_id from webhook_deliveries where event_id = any(?::text[]) and status in ${unfinishedSql}`,
    [`{${ids.join(",")}}`],
  );
  return new Set(rows.map((r) => r.event_id));
}

/** Whether a delivery of the event has not ended (it keeps the event, and all its deliveries, past retention). */
export async function hasUnfinishedDelivery(em: EntityManager, eventId: string): Promise<boolean> {
  return (await eventsWithUnfinishedDelivery(em, [eventId])).has(eventId);
}

/**
 * The owner's events (`eventId` only, when given) that may be past retention and kept by a
 * delivery that has not ended: what a list of deliveries must let through besides the recent and
 * the unfinished ones. Over-approximated by an hour (the slack between an id's time and its row's
 * created_at, platform/time-partitions.ts), which the list's own check of each event removes; in
 * practice a handful (replays and retries of events about to pass retention), found among the
 * deliveries that have not ended, never among the ended ones.
 */
export async function eventsKeptPastRetention(em: EntityManager, owner: RowOwner, retentionSeconds: number, eventId?: string): Promise<string[]> {
  const rows = await em.execute<{ event_id: string }[]>(
    `select distinct k.event_id from webhook_deliveries k
      where k.merchant_id = ? and k.environment = ? and k.status in ${unfinishedSql}
        and payments_id_time_from(k.event_id) <= ${retentionCutoff(retentionSeconds)}${eventId === undefined ? "" : " and k.event_id = ?"}`,
    [owner.merchantId, owner.environment, ...(eventId === undefined ? [] : [eventId])],
  );
  return rows.map((r) => r.event_id);
}
