import { AddressSource, PooledAddress } from "../addresses/entities.ts";
import { ApiKey, CashierSession, InternalCredential, Merchant, SiteCredential } from "../auth/entities.ts";
import { WebhookAttemptRecord, WebhookDeliveryRecord } from "../delivery/entities.ts";
import { WebhookEventRecord } from "../events/entities.ts";
import { IdempotencyRecord } from "../idempotency/entities.ts";
import { ChainObservation } from "../observations/entities.ts";
import { PaymentIntentRecord } from "../intents/entities.ts";
import { openDatabase as open, type Database } from "../platform/db.ts";
import { PlatformSetting } from "../platform/settings.ts";
import { QrConfiguration } from "../qr/entities.ts";
import { WebhookEndpointRecord } from "../webhooks/entities.ts";

/** Every entity of every domain, for the ORM and the migration generator. */
export const entities = [
  PlatformSetting,
  Merchant,
  ApiKey,
  PaymentIntentRecord,
  WebhookEventRecord,
  IdempotencyRecord,
  WebhookEndpointRecord,
  WebhookDeliveryRecord,
  WebhookAttemptRecord,
  InternalCredential,
  AddressSource,
  PooledAddress,
  ChainObservation,
  SiteCredential,
  CashierSession,
  QrConfiguration,
];

/** The service's database: every domain's entities on the committed migrations. */
export function openDatabase(url: string, poolSize?: number): Promise<Database> {
  return open(url, entities, poolSize);
}
