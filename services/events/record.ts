import type { JsonValue } from "@bufbuild/protobuf";
import type { Environment } from "../auth/keys.ts";
import type { EntityManager } from "../platform/db.ts";
import { newId } from "../platform/ids.ts";
import type { EventType } from "../intents/status.ts";
import { fanOut } from "../delivery/store.ts";
import { WebhookEventRecord } from "./entities.ts";

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
  await em.insert(WebhookEventRecord, {
    id,
    merchant: event.merchantId,
    environment: event.environment,
    type: event.type,
    paymentIntentId: event.paymentIntentId ?? null,
    payload,
    createdAt,
  });
  const deliveryIds = await fanOut(em, { merchantId: event.merchantId, environment: event.environment }, id, createdAt, event.endpointId);
  return { id, payload, deliveryIds };
}
