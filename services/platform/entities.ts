import { ApiKey, Merchant } from "../auth/entities.ts";
import { WebhookEventRecord } from "../events/entities.ts";
import { IdempotencyRecord } from "../idempotency/entities.ts";
import { PaymentIntentRecord } from "../intents/entities.ts";

/** Every entity, for the ORM and the migration generator. */
export const entities = [Merchant, ApiKey, PaymentIntentRecord, WebhookEventRecord, IdempotencyRecord];
