import type { JsonValue } from "@bufbuild/protobuf";
import type { Environment, Owner } from "../auth/keys.ts";
import { findOwned } from "../platform/owned.ts";
import type { EntityManager } from "../platform/db.ts";
import { newId } from "../platform/ids.ts";
import type { EventType } from "../intents/status.ts";
import { maxEnabledEndpoints } from "../webhooks/limits.ts";

export interface NewEvent {
  merchantId: string;
  environment: Environment;
  type: EventType;
  /** The envelope's `data`, e.g. { payment_intent: {...} } */
  data: Record<string, JsonValue>;
  paymentIntentId?: string;
  createdAt?: Date;
  /** Deliver to this endpoint only (webhook.test); default: every enabled endpoint. */
  endpointId?: string;
}

export interface RecordedEvent {
  id: string;
  payload: string;
  /** The pending deliveries created with it. */
  deliveryIds: string[];
}

/**
 * Records an immutable event in the caller's transaction: the envelope
 * (id, type, created_at, data) is serialized here, once, and those bytes are
 * what every delivery sends. Its deliveries (the outbox) are inserted in the
 * same transaction, so an event is never recorded without them.
 */
export async function recordEvent(em: EntityManager, event: NewEvent): Promise<RecordedEvent> {
  const id = newId("evt");
  const createdAt = event.createdAt ?? new Date();
  const payload = JSON.stringify({ id, type: event.type, created_at: createdAt.toISOString(), data: event.data });
  // One statement for the event and its deliveries; delivery ids are made here, one
  // for each endpoint that may be enabled, and the statement takes what it needs.
  const deliveryIds = Array.from({ length: maxEnabledEndpoints }, () => newId("wd"));
  const rows = await em.execute<{ id: string }[]>(
    `with event as (
       insert into webhook_events (id, merchant_id, environment, type, payment_intent_id, payload, created_at)
       values (?, ?, ?, ?, ?, ?, ?)
       returning id
     ), endpoint as (
       select e.id, row_number() over (order by e.id) as n from webhook_endpoints e
        where e.merchant_id = ? and e.environment = ? and e.status = 'enabled'${event.endpointId ? " and e.id = ?" : ""}
     )
     insert into webhook_deliveries (id, merchant_id, environment, event_id, endpoint_id, status, attempt_count, created_at, updated_at)
     select (?::text[])[endpoint.n], ?, ?, event.id, endpoint.id, 'pending', 0, ?, ? from event, endpoint
     returning id`,
    [
      id,
      event.merchantId,
      event.environment,
      event.type,
      event.paymentIntentId ?? null,
      payload,
      createdAt,
      event.merchantId,
      event.environment,
      ...(event.endpointId ? [event.endpointId] : []),
      `{${deliveryIds.join(",")}}`,
      event.merchantId,
      event.environment,
      createdAt,
      createdAt,
    ],
  );
  return { id, payload, deliveryIds: rows.map((r) => r.id) };
}

/** An event's stored envelope bytes, if the owner's. */
export async function findEventPayload(em: EntityManager, owner: Owner, id: string): Promise<{ payload: string } | undefined> {
  return findOwned<{ payload: string; merchant_id: string; environment: string }>(
    em,
    `select payload, merchant_id, environment from webhook_events where id = ?`,
    id,
    owner,
  );
}
