import { ApiKey, Merchant } from "../auth/entities.ts";
import { WebhookEventRecord } from "../events/entities.ts";
import { WebhookAttemptRecord, WebhookDeliveryRecord } from "../delivery/entities.ts";
import { IdempotencyRecord } from "../idempotency/entities.ts";
import { PaymentIntentRecord } from "../intents/entities.ts";
import { WebhookEndpointRecord } from "../webhooks/entities.ts";

/** Every entity, for the ORM and the migration generator. */
export const entities = [Merchant, ApiKey, PaymentIntentRecord, WebhookEventRecord, IdempotencyRecord, WebhookEndpointRecord, WebhookDeliveryRecord, WebhookAttemptRecord];
