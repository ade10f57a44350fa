import { hasUnfinishedDelivery, withinRetention } from "./retention.ts";
import type { JsonValue } from "@bufbuild/protobuf";
import type { Environment, Owner } from "../auth/keys.ts";
import { findOwned } from "../platform/owned.ts";
import { executePrepared } from "../platform/prepared.ts";
import type { EntityManager } from "../platform/db.ts";
import { newTimedId, newTimedIds } from "../platform/ids.ts";
import { createdAtOfId } from "../platform/time-partitions.ts";
import { insertPendingDeliveries, pendingDeliveries } from "../delivery/webhook-deliveries.ts";
import { allEvents, receives, type EventType, type ExtensionEventType } from "../vocabulary/event-types.ts";
import { maxEnabledEndpoints } from "../vocabulary/limits.ts";

export interface NewEvent {
  merchantId: string;
  environment: Environment;
  type: EventType | ExtensionEventType;
  /** The envelope's `data`, e.g. { payment_intent: {...} } */
  data: Record<string, JsonValue>;
  paymentIntentId?: string;
  createdAt?: Date;
  /** Deliver to this endpoint only, whatever its enabled_events (webhook.test); default: every enabled endpoint that takes the type. */
  endpointId?: string;
}

export interface RecordedEvent {
  id: string;
  payload: string;
  /** The pending deliveries created with it. */
  deliveryIds: string[];
}

/** An event's envelope as every delivery sends it, serialized once. */
function envelope(id: string, event: NewEvent, createdAt: Date): string {
  return JSON.stringify({ id, type: event.type, created_at: createdAt.toISOString(), data: event.data });
}

/**
 * Records an immutable event in the caller's transaction: the envelope
 * (id, type, created_at, data) is serialized here, once, and those bytes are
 * what every delivery sends. Its deliveries (the outbox) are inserted in the
 * same transaction, so an event is never recorded without them.
 */
export async function recordEvent(em: EntityManager, event: NewEvent): Promise<RecordedEvent> {
  const { sql: only, params: onlyParams } = endpointsFor(event);
  // One statement for the event and its deliveries in the usual case (eventCtes). It also
  // counts the enabled endpoints, because more can exist than it makes deliveries for (rows
  // written directly, or a limit lowered since): those get theirs below.
  const first = eventCtes(event);
  const { id, createdAt } = first;
  const rows = await em.execute<{ id: string; enabled: number }[]>(
    `with ${first.sql} select delivery.id, (select count(*) from endpoint)::int as enabled from delivery`,
    first.params,
  );
  const deliveryIds = rows.map((r) => r.id);
  let missing = (rows[0]?.enabled ?? 0) - rows.length;
  while (missing > 0) {
    // The endpoints still without a delivery of this event (one enabled meanwhile included).
    const ids = newTimedIds("wd", createdAt, missing);
    const more = await em.execute<{ id: string; remaining: number }[]>(
      `with endpoint as (
         select e.id, row_number() over (order by e.id) as n from webhook_endpoints e
          where e.merchant_id = ? and e.environment = ? and e.status = 'enabled' ${only}
            and not exists (select 1 from webhook_deliveries d where d.event_id = ? and d.endpoint_id = e.id)
       ), delivery as (
         ${pendingDeliveries("event", { ...eachEndpoint, eventId: "?", from: "from endpoint where endpoint.n <= ?" })}
       )
       select delivery.id, (select count(*) from endpoint)::int as remaining from delivery`,
      [event.merchantId, event.environment, ...onlyParams, id, `{${ids.join(",")}}`, event.merchantId, event.environment, id, createdAt, createdAt, ids.length],
    );
    deliveryIds.push(...more.map((r) => r.id));
    missing = (more[0]?.remaining ?? 0) - more.length;
  }
  return { id, payload: first.payload, deliveryIds };
}

/**
 * An event and its deliveries as the CTEs `event`, `endpoint` and `delivery` (each name + `suffix`) of a statement,
 * written only if `from` (a CTE of that statement) yields a row, or always without one. Delivery
 * ids are made here, as many as endpoints can be enabled through the API, and the statement
 * takes what it needs: more enabled endpoints than that get none (recordEvent adds theirs; a
 * caller writing it all in one statement guards with deliveriesFit).
 *
 * `quiet`: the caller wakes a relay of its own process once the statement has committed
 * (delivery/outbox-wake.ts), so the outbox trigger sends no NOTIFY for these deliveries: the
 * setting is read by the trigger, and joined into the deliveries' select so that it is set first.
 */
export function eventCtes(event: NewEvent, from?: string, quiet = false, suffix = ""): { sql: string; params: unknown[]; id: string; payload: string; createdAt: Date } {
  const s = suffix;
  const createdAt = event.createdAt ?? new Date();
  const id = newTimedId("evt", createdAt);
  const payload = envelope(id, event, createdAt);
  const only = endpointsFor(event);
  const ids = newTimedIds("wd", createdAt, maxEnabledEndpoints);
  return {
    id,
    payload,
    createdAt,
    sql: `event${s} as (
       insert into webhook_events (id, merchant_id, environment, type, payment_intent_id, payload, created_at)
       select ?, ?, ?, ?, ?, ?, ?${from ? ` from ${from}` : ""}
       returning id
     ), endpoint${s} as (
       select e.id, row_number() over (order by e.id) as n from webhook_endpoints e
        where e.merchant_id = ? and e.environment = ? and e.status = 'enabled' ${only.sql}
     ),${quiet ? ` quiet${s} as (select set_config('webhook.outbox_wake', 'caller', true)),` : ""} delivery${s} as (
       ${pendingDeliveries("event", { ...eachEndpoint, id: `(?::text[])[endpoint${s}.n]`, eventId: `event${s}.id`, endpointId: `endpoint${s}.id`, from: `from event${s}, endpoint${s}${quiet ? `, quiet${s}` : ""} where endpoint${s}.n <= ?` })}
     )`,
    params: [
      id,
      event.merchantId,
      event.environment,
      event.type,
      event.paymentIntentId ?? null,
      payload,
      createdAt,
      event.merchantId,
      event.environment,
      ...only.params,
      `{${ids.join(",")}}`,
      event.merchantId,
      event.environment,
      createdAt,
      createdAt,
      ids.length,
    ],
  };
}

/**
 * A delivery for each row of the CTE `endpoint` (n: its place), made within the statement's ids:
 * parameters the ids (an array), the merchant, the environment, then the event's id when given as
 * a parameter, created_at and updated_at (the event's time), and the number of ids.
 */
const eachEndpoint = {
  id: "(?::text[])[endpoint.n]",
  merchantId: "?",
  environment: "?",
  endpointId: "endpoint.id",
  createdAt: "?",
  updatedAt: "?",
} as const;

/** Which enabled endpoints get a delivery of the event: the one named, or those whose enabled_events take its type (as vocabulary/event-types.ts receives()). */
function endpointsFor(event: NewEvent): { sql: string; params: unknown[] } {
  if (event.endpointId) return { sql: "and e.id = ?", params: [event.endpointId] };
  return { sql: `and (? = any(e.enabled_events) or ? = any(e.enabled_events))`, params: [allEvents, event.type] };
}

/** A condition that eventCtes makes a delivery for every enabled endpoint of the merchant. */
export function deliveriesFit(merchantId: string, environment: string): { sql: string; params: unknown[] } {
  return {
    sql: `(select count(*) from webhook_endpoints where merchant_id = ? and environment = ? and status = 'enabled') <= ?`,
    params: [merchantId, environment, maxEnabledEndpoints],
  };
}

/**
 * An event's stored envelope bytes, if the owner's and kept (events/retention.ts): within
 * retention, or kept with all its deliveries by one that has not ended, as they are. Read from its
 * day alone; only an event past retention has its deliveries looked at (a condition on them in the
 * same statement would be planned against every day's deliveries, on every read).
 */
export async function findEventPayload(em: EntityManager, owner: Owner, id: string, retentionSeconds: number): Promise<{ payload: string } | undefined> {
  const row = await findOwned<{ payload: string; merchant_id: string; environment: string; recent: boolean }>(
    em,
    `select payload, merchant_id, environment, ${withinRetention("ev", retentionSeconds)} as recent
       from webhook_events ev where id = ? and ${createdAtOfId("ev.created_at", "?")}`,
    id,
    owner,
  );
  if (!row) return undefined;
  if (!row.recent && !(await hasUnfinishedDelivery(em, id))) return undefined;
  return { payload: row.payload };
}

/**
 * An event ready to record: its id and its envelope serialized, once (the bytes every delivery
 * sends). A settlement prepares its events while its rows are written (intents/settle.ts).
 */
export interface PreparedEvent {
  id: string;
  merchantId: string;
  environment: Environment;
  type: EventType | ExtensionEventType;
  /** Its row for json_to_recordset, without the payload: the payload is added as JSON, not a string in it (recordPrepared). */
  row: string;
  payload: string;
  createdAt: string;
}

/** An event of recordEvents, prepared: `now` is its created_at when it names none. */
export function prepareEvent(e: NewEvent, now = new Date()): PreparedEvent {
  if (e.endpointId) throw new Error("recordEvents: an event for one endpoint goes through recordEvent");
  const createdAt = e.createdAt ?? now;
  const id = newTimedId("evt", createdAt);
  const at = createdAt.toISOString();
  const row = JSON.stringify({ id, merchant_id: e.merchantId, environment: e.environment, type: e.type, payment_intent_id: e.paymentIntentId ?? null, created_at: at });
  return { id, merchantId: e.merchantId, environment: e.environment, type: e.type, row, payload: envelope(id, e, createdAt), createdAt: at };
}

/**
 * Records many events (none for one endpoint only) in three statements whatever their number: the
 * events, the endpoints of their merchants that take them, and one delivery per such endpoint and
 * event, in the caller's transaction. What recordEvent does for one, for a batch of settlements.
 */
export async function recordEvents(em: EntityManager, events: readonly NewEvent[]): Promise<void> {
  const now = new Date();
  await recordPrepared(em, events.map((e) => prepareEvent(e, now)));
}

/** recordEvents of events prepared ahead (prepareEvent). */
export async function recordPrepared(em: EntityManager, events: readonly PreparedEvent[]): Promise<void> {
  if (events.length === 0) return;
  // Values sent apart (executePrepared): thousands of envelopes are megabytes of JSON. Each
  // envelope goes into the recordset as JSON, not as a string in it (escaped here, unescaped
  // there): a json column keeps its text as written, so the payload stored is the envelope's
  // bytes exactly.
  let recordset = "[";
  for (let i = 0; i < events.length; i++) {
    const e = events[i] as PreparedEvent;
    recordset += `${i === 0 ? "" : ","}${e.row.slice(0, -1)},"payload":${e.payload}}`;
  }
  recordset += "]";
  await executePrepared(
    em,
    `insert into webhook_events (id, merchant_id, environment, type, payment_intent_id, payload, created_at)
     select id, merchant_id, environment, type, payment_intent_id, payload::text, created_at
       from json_to_recordset(?::json) as x(id text, merchant_id text, environment text, type text, payment_intent_id text, payload json, created_at timestamptz)`,
    [recordset],
  );
  const owners = [...new Set(events.map((e) => `${e.merchantId}\u0000${e.environment}`))].map((k) => k.split("\u0000"));
  const endpoints = await em.execute<{ id: string; merchant_id: string; environment: string; enabled_events: string[] }[]>(
    `select e.id, e.merchant_id, e.environment, e.enabled_events from webhook_endpoints e
       join json_to_recordset(?::json) as o(merchant_id text, environment text) on e.merchant_id = o.merchant_id and e.environment = o.environment
      where e.status = 'enabled'`,
    [JSON.stringify(owners.map(([m, env]) => ({ merchant_id: m, environment: env })))],
  );
  const byOwner = new Map<string, typeof endpoints>();
  for (const e of endpoints) {
    const k = `${e.merchant_id}\u0000${e.environment}`;
    byOwner.set(k, [...(byOwner.get(k) ?? []), e]);
  }
  const deliveries: { id: string; event_id: string; endpoint_id: string; merchant_id: string; environment: string; created_at: string }[] = [];
  for (const r of events) {
    const takers = (byOwner.get(`${r.merchantId}\u0000${r.environment}`) ?? []).filter((e) => receives(e.enabled_events, r.type));
    const ids = newTimedIds("wd", new Date(r.createdAt), takers.length);
    takers.forEach((e, i) => deliveries.push({ id: ids[i] as string, event_id: r.id, endpoint_id: e.id, merchant_id: r.merchantId, environment: r.environment, created_at: r.createdAt }));
  }
  if (deliveries.length === 0) return;
  await insertPendingDeliveries(
    em,
    "event",
    {
      id: "id",
      merchantId: "merchant_id",
      environment: "environment",
      eventId: "event_id",
      endpointId: "endpoint_id",
      createdAt: "created_at",
      updatedAt: "created_at",
      from: "from json_to_recordset(?::json) as d(id text, merchant_id text, environment text, event_id text, endpoint_id text, created_at timestamptz)",
    },
    [JSON.stringify(deliveries)],
  );
}
