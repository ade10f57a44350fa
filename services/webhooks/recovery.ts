import type { Environment } from "../auth/keys.ts";
import { insertPendingDeliveries } from "../delivery/webhook-deliveries.ts";
import type { EntityManager } from "../platform/db.ts";
import { apiError, validationError } from "../platform/errors.ts";
import { newId, newTimedId } from "../platform/ids.ts";
import { eventTypes, extensionEventTypes, receives } from "../vocabulary/event-types.ts";

/**
 * What an enabled endpoint missed (Svix's recover), enqueued a page at a time: a pending delivery
 * of each of its merchant's events of its environment recorded from `since` (not before the
 * endpoint was created) up to the request, of a type it takes, of which it has no delivery yet, in
 * event order. A busy merchant's recovery is millions of deliveries: created at once they would
 * be one long transaction, and every other merchant's webhook published after them would wait in
 * the stream behind them. So the request creates the first page, and the scheduler adds each next
 * one once the endpoint has taken most of the last (advanceRecoveries): at any time about a page
 * of it waits ahead of others' deliveries, and it goes at the endpoint's own pace.
 */

export interface RecoveryBounds {
  /** WEBHOOK_RECOVERY_MAX_DAYS: how far back a recovery may reach without force. */
  maxDays: number;
  /** WEBHOOK_RECOVERY_MAX_EVENTS: how many events a recovery may deliver without force. */
  maxEvents: number;
  /** WEBHOOK_RECOVERY_PAGE_SIZE: deliveries created at once. */
  pageSize: number;
}

export interface RecoveryStart {
  /** Events it delivers, one delivery each. */
  recovered: number;
  /** Of those, the ones given their delivery in the request (the first page). */
  enqueued: number;
  /** The recovery that enqueues the rest; undefined when the first page held them all. */
  recoveryId: string | undefined;
  firstEventId: string | undefined;
  lastEventId: string | undefined;
}

/** What a page is taken from: an endpoint's missed events between two times. */
interface Scope {
  endpointId: string;
  merchantId: string;
  environment: string;
  enabledEvents: string[];
  /** The earliest event time: since, or the endpoint's creation if later. */
  from: Date;
  until: Date;
}

interface Cursor {
  createdAt: Date;
  eventId: string;
}

/**
 * The types the endpoint takes, decided by receives() as live delivery decides it (an endpoint
 * made before "*" took every type has the list it took then). webhook.test events are
 * each meant for one endpoint and never recovered.
 */
function takenTypes(enabled: readonly string[]): string[] {
  return [...eventTypes, ...extensionEventTypes].filter((type) => type !== "webhook.test" && receives(enabled, type));
}

/** The events of the scope it has no delivery of (alias ev); the announcement of its own disabling aside. */
function missed(scope: Scope, after: Cursor | undefined): { sql: string; params: unknown[] } {
  return {
    sql: `ev.merchant_id = ? and ev.environment = ? and ev.created_at >= ? and ev.created_at <= ?
      and (ev.created_at, ev.id) > (?::timestamptz, ?)
      and ev.type = any(?::text[])
      and not (ev.type = 'webhook_endpoint.disabled' and ev.payload::jsonb #>> '{data,webhook_endpoint,id}' = ?)
      and not exists (select 1 from webhook_deliveries d where d.event_id = ev.id and d.endpoint_id = ?)`,
    params: [
      scope.merchantId,
      scope.environment,
      scope.from,
      scope.until,
      after?.createdAt ?? "-infinity",
      after?.eventId ?? "",
      `{${takenTypes(scope.enabledEvents).join(",")}}`,
      scope.endpointId,
      scope.endpointId,
    ],
  };
}

/**
 * Creates the deliveries (cause `recovery`) of the next `size` missed events after `after`, in event order (created_at
 * one millisecond apart, so the relay publishes them in that order). Returns how many and the last
 * event's place, the next page's cursor.
 */
async function enqueuePage(em: EntityManager, scope: Scope, after: Cursor | undefined, size: number, now: Date): Promise<{ ids: string[]; firstEventId: string | undefined; last: Cursor | undefined }> {
  const where = missed(scope, after);
  const page = await em.execute<{ id: string; created_at: Date | string }[]>(
    `select ev.id, ev.created_at from webhook_events ev where ${where.sql} order by ev.created_at, ev.id limit ?`,
    [...where.params, size],
  );
  if (page.length === 0) return { ids: [], firstEventId: undefined, last: undefined };
  // Each id carries its delivery's created_at (now + n ms, below).
  const ids = page.map((_, n) => newTimedId("wd", new Date(now.getTime() + n)));
  await insertPendingDeliveries(
    em,
    "recovery",
    {
      id: "i.id",
      merchantId: "?",
      environment: "?",
      eventId: "i.event",
      endpointId: "?",
      createdAt: "?::timestamptz + i.n * interval '1 millisecond'",
      updatedAt: "?",
      from: "from json_to_recordset(?::json) as i(id text, event text, n int)",
    },
    [scope.merchantId, scope.environment, scope.endpointId, now, now, JSON.stringify(page.map((e, n) => ({ id: ids[n], event: e.id, n })))],
  );
  const last = page[page.length - 1]!;
  return { ids, firstEventId: page[0]!.id, last: { createdAt: new Date(last.created_at), eventId: last.id } };
}

interface EndpointRow {
  id: string;
  merchant_id: string;
  environment: string;
  status: string;
  enabled_events: string[];
  created_at: Date | string;
}

function scopeOf(e: EndpointRow, since: Date, until: Date): Scope {
  const created = new Date(e.created_at);
  return { endpointId: e.id, merchantId: e.merchant_id, environment: e.environment, enabledEvents: e.enabled_events, from: since > created ? since : created, until };
}

/**
 * Starts the recovery of what the endpoint missed since `since`, in the caller's transaction:
 * refused over the bounds unless `force` (nothing written), and while another recovery of the
 * endpoint runs; the first page is enqueued here. The endpoint's row lock serialises concurrent
 * recoveries, so running it again, or twice at once, creates nothing more.
 */
export async function startRecovery(
  em: EntityManager,
  endpointId: string,
  since: Date,
  environment: Environment | undefined,
  o: { bounds: RecoveryBounds; force: boolean; now?: Date },
): Promise<RecoveryStart> {
  const now = o.now ?? new Date();
  const { bounds, force } = o;
  const [endpoint] = await em.execute<EndpointRow[]>(
    `select id, merchant_id, environment, status, enabled_events, created_at from webhook_endpoints where id = ? and environment = coalesce(?, environment) for update`,
    [endpointId, environment ?? null],
  );
  if (!endpoint) throw apiError("not_found", `No webhook endpoint ${endpointId}.`, "endpoint_id");
  if (endpoint.status !== "enabled") throw apiError("invalid_state", "The endpoint is disabled: nothing can be delivered to it.", "endpoint_id");
  const days = (now.getTime() - since.getTime()) / 86_400_000;
  if (days > bounds.maxDays && !force) {
    throw validationError(
      "recover_since",
      `Recovering since ${since.toISOString()} reaches back ${Math.ceil(days)} days, more than the ${bounds.maxDays} WEBHOOK_RECOVERY_MAX_DAYS allows: choose a later time, or force it (--force).`,
    );
  }
  const [running] = await em.execute<{ since: Date | string; events: number; enqueued: number }[]>(
    `select since, events, enqueued from webhook_recoveries where endpoint_id = ? and status = 'running'`,
    [endpointId],
  );
  if (running) {
    throw apiError(
      "invalid_state",
      `Webhook endpoint ${endpointId} is still recovering the events since ${new Date(running.since).toISOString()} (${running.enqueued} of ${running.events} enqueued): run it again once that is done.`,
      "endpoint_id",
    );
  }
  const scope = scopeOf(endpoint, since, now);
  const where = missed(scope, undefined);
  // Counted only as far as the bound, so a refusal reads no more than that; LIMIT NULL counts all.
  const [{ n: count } = { n: 0 }] = await em.execute<{ n: number }[]>(
    `select count(*)::int as n from (select 1 from webhook_events ev where ${where.sql} limit ?) x`,
    [...where.params, force ? null : bounds.maxEvents + 1],
  );
  if (count > bounds.maxEvents && !force) {
    throw validationError(
      "recover_since",
      `Recovering since ${since.toISOString()} would deliver more than the ${bounds.maxEvents} events WEBHOOK_RECOVERY_MAX_EVENTS allows: choose a later time, or force it (--force).`,
    );
  }
  if (count === 0) return { recovered: 0, enqueued: 0, recoveryId: undefined, firstEventId: undefined, lastEventId: undefined };
  const [lastEvent] = await em.execute<{ id: string }[]>(`select ev.id from webhook_events ev where ${where.sql} order by ev.created_at desc, ev.id desc limit 1`, where.params);
  const first = await enqueuePage(em, scope, undefined, bounds.pageSize, now);
  let recoveryId: string | undefined;
  if (first.ids.length < count && first.last) {
    recoveryId = newId("wr");
    await em.execute(
      `insert into webhook_recoveries (id, endpoint_id, since, until, cursor_created_at, cursor_event_id, page_size, events, enqueued, status, page_at, created_at, updated_at)
       values (?, ?, ?, ?, ?, ?, ?, ?, ?, 'running', ?, ?, ?)`,
      [recoveryId, endpointId, since, now, first.last.createdAt, first.last.eventId, bounds.pageSize, count, first.ids.length, now, now, now],
    );
  }
  return { recovered: count, enqueued: first.ids.length, recoveryId, firstEventId: first.firstEventId, lastEventId: lastEvent?.id };
}

export interface RecoveryStep {
  id: string;
  endpointId: string;
  enqueued: number;
  /** done: every event has its delivery; stopped: its endpoint was disabled; running: more to come. */
  status: "running" | "done" | "stopped";
  events: number;
}

/**
 * One pass over the running recoveries (the scheduler's): each whose endpoint has fewer than half a
 * page of deliveries still waiting for their first attempt gets its next page. A disabled
 * endpoint's recovery stops (enabling it again with a recovery starts anew). Recoveries and their
 * endpoints are taken with SKIP LOCKED, so several schedulers share them and one locked by a
 * request or a disable is left to a later pass. Returns what it changed.
 */
export async function advanceRecoveries(em: EntityManager, limit = 20, now = new Date()): Promise<RecoveryStep[]> {
  return em.transactional(async (tx) => {
    const rows = await tx.execute<
      (EndpointRow & { recovery_id: string; since: Date | string; until: Date | string; cursor_created_at: Date | string | null; cursor_event_id: string | null; page_size: number; events: number; enqueued: number; page_at: Date | string })[]
    >(
      `select r.id as recovery_id, r.since, r.until, r.cursor_created_at, r.cursor_event_id, r.page_size, r.events, r.enqueued, r.page_at,
              e.id, e.merchant_id, e.environment, e.status, e.enabled_events, e.created_at
         from webhook_recoveries r join webhook_endpoints e on e.id = r.endpoint_id
        where r.status = 'running'
        order by r.page_at limit ?
        for update of r, e skip locked`,
      [limit],
    );
    const steps: RecoveryStep[] = [];
    for (const r of rows) {
      const step = { id: r.recovery_id, endpointId: r.id, events: r.events };
      if (r.status !== "enabled") {
        await tx.execute(`update webhook_recoveries set status = 'stopped', updated_at = ? where id = ?`, [now, r.recovery_id]);
        steps.push({ ...step, enqueued: r.enqueued, status: "stopped" });
        continue;
      }
      // Its last page was created from page_at on (and any live delivery of it since): the index on
      // (endpoint_id, created_at) reads only those.
      const [{ n: waiting } = { n: 0 }] = await tx.execute<{ n: number }[]>(
        `select count(*)::int as n from (select 1 from webhook_deliveries d where d.endpoint_id = ? and d.created_at >= ? and d.status = 'pending' and d.attempt_count = 0 limit ?) x`,
        [r.id, r.page_at, r.page_size],
      );
      if (waiting >= Math.max(1, Math.ceil(r.page_size / 2))) continue;
      const cursor = r.cursor_created_at && r.cursor_event_id ? { createdAt: new Date(r.cursor_created_at), eventId: r.cursor_event_id } : undefined;
      const page = await enqueuePage(tx, scopeOf(r, new Date(r.since), new Date(r.until)), cursor, r.page_size, now);
      const status = page.ids.length < r.page_size ? "done" : "running";
      const next = page.last ?? cursor;
      await tx.execute(
        `update webhook_recoveries set enqueued = enqueued + ?, cursor_created_at = ?, cursor_event_id = ?, page_at = ?, status = ?, updated_at = ? where id = ?`,
        [page.ids.length, next?.createdAt ?? null, next?.eventId ?? null, now, status, now, r.recovery_id],
      );
      steps.push({ ...step, enqueued: r.enqueued + page.ids.length, status });
    }
    return steps;
  });
}
