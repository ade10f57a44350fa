import type { JsonValue } from "@bufbuild/protobuf";
import type { Environment } from "../auth/keys.ts";
import type { EntityManager } from "../platform/db.ts";
import { newId } from "../platform/ids.ts";
import type { EventType } from "../intents/status.ts";
import { WebhookEventRecord } from "./entities.ts";

export interface NewEvent {
  merchantId: string;
  environment: Environment;
  type: EventType;
  /** The envelope's `data`, e.g. { payment_intent: {...} } */
  data: Record<string, JsonValue>;
  paymentIntentId?: string;
  createdAt?: Date;
}

/**
 * Records an immutable event in the caller's transaction: the envelope
 * (id, type, created_at, data) is serialized here, once, and those bytes are
 * what every delivery sends.
 */
export async function recordEvent(em: EntityManager, event: NewEvent): Promise<{ id: string; payload: string }> {
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
  return { id, payload };
}
