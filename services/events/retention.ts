import type { EntityManager } from "../platform/db.ts";

/**
 * EVENT_RETENTION on read: an event older than the retention is gone for the API (404, out of the
 * deliveries list) as soon as it is past it, whatever the retention job has removed yet, so what a
 * merchant sees never depends on the job's timing. What is still needed stays: a delivery that has
 * not ended (pending, a retry waiting included, or processing) keeps itself and its event.
 */

/** The default EVENT_RETENTION, in seconds (90 days). */
export const defaultEventRetentionSeconds = 90 * 86_400;

/** Delivery statuses that have not ended: such a delivery and its event outlive EVENT_RETENTION until it ends. */
export const unfinishedDeliveryStatuses = ["pending", "processing"] as const;
/** unfinishedDeliveryStatuses as an SQL list, for `status in ${unfinishedSql}`. */
export const unfinishedSql = `(${unfinishedDeliveryStatuses.map((s) => `'${s}'`).join(", ")})`;

/** The retention as SQL: a whole number of seconds from validated config, written in (prepared statements stay one per process). */
function cutoff(retentionSeconds: number): string {
  if (!Number.isSafeInteger(retentionSeconds) || retentionSeconds <= 0) throw new Error(`event retention must be a positive whole number of seconds, got ${retentionSeconds}`);
  return `now() - make_interval(secs => ${retentionSeconds})`;
}

/** SQL condition: the event aliased `ev` is kept (within retention, or one of its deliveries has not ended). */
export function eventKept(ev: string, retentionSeconds: number): string {
  return `(${ev}.created_at > ${cutoff(retentionSeconds)}
    or exists (select 1 from webhook_deliveries kept where kept.event_id = ${ev}.id and kept.status in ${unfinishedSql}))`;
}

/** SQL condition: the delivery aliased `d`, of the event aliased `ev`, is kept (its event within retention, or it has not ended). */
export function deliveryKept(d: string, ev: string, retentionSeconds: number): string {
  return `(${ev}.created_at > ${cutoff(retentionSeconds)} or ${d}.status in ${unfinishedSql})`;
}

/** The earliest time an operator's recovery may reach back to: nothing before the retention is sent again (its event is gone, or about to be). */
export function retainedSince(since: Date, retentionSeconds: number, now: Date): Date {
  return new Date(Math.max(since.getTime(), now.getTime() - retentionSeconds * 1000));
}

/** Whether a delivery of the event has not ended (it keeps the event past retention). */
export async function hasUnfinishedDelivery(em: EntityManager, eventId: string): Promise<boolean> {
  const [row] = await em.execute<{ kept: boolean }[]>(`select exists (select 1 from webhook_deliveries where event_id = ? and status in ${unfinishedSql}) as kept`, [eventId]);
  return row?.kept === true;
}
