import type { PostgreSqlConnection } from "@mikro-orm/postgresql";
import type pg from "pg";
import { AddressSource, PooledAddress } from "../addresses/entities.ts";
import { ApiKey, ApiKeyLastUse, CashierSession, DashboardLink, DashboardSession, InternalCredential, Merchant, SiteCredential } from "../auth/entities.ts";
import { WebhookAttemptRecord, WebhookDeliveryRecord, WebhookRecoveryRecord } from "../webhooks/delivery-entities.ts";
import { WebhookEventRecord } from "../events/entities.ts";
import { IdempotencyRecord } from "../idempotency/entities.ts";
import { ChainObservation, RejectedObservation } from "../chains/output-entities.ts";
import { ChainBlock, ChainNodeReport, ChainWatcher } from "../chains/entities.ts";
import { PaymentIntentMethodRecord, PaymentIntentRecord } from "../intents/entities.ts";
import { ConfirmationPolicy, MerchantPolicy } from "../policy/entities.ts";
import { openDatabase as open, type Database } from "../platform/db.ts";
import { PlatformSetting } from "../platform/settings.ts";
import { QrConfiguration } from "../qr/entities.ts";
import { RetentionState } from "../retention/entities.ts";
import { RefundRecord } from "../refunds/entities.ts";
import { SecretKeyCheck, WebhookEndpointRecord } from "../webhooks/entities.ts";

/** Every entity of every domain, for the ORM and the migration generator. */
export const entities = [
  PlatformSetting,
  Merchant,
  ApiKey,
  ApiKeyLastUse,
  PaymentIntentRecord,
  PaymentIntentMethodRecord,
  RefundRecord,
  WebhookEventRecord,
  IdempotencyRecord,
  WebhookEndpointRecord,
  WebhookDeliveryRecord,
  WebhookAttemptRecord,
  WebhookRecoveryRecord,
  InternalCredential,
  AddressSource,
  PooledAddress,
  ChainObservation,
  RejectedObservation,
  SiteCredential,
  CashierSession,
  DashboardLink,
  DashboardSession,
  QrConfiguration,
  SecretKeyCheck,
  ChainWatcher,
  ChainBlock,
  ChainNodeReport,
  ConfirmationPolicy,
  MerchantPolicy,
  RetentionState,
];

/** The service's database: every domain's entities on the committed migrations. */
export async function openDatabase(url: string, poolSize?: number): Promise<Database> {
  const db = await open(url, entities, poolSize);
  releaseDeadClients(await (db.em.getConnection() as PostgreSqlConnection).getNativeClient());
  return db;
}

/**
 * Gives the pool back a checked-out connection the server dropped. Kysely (under MikroORM) never
 * releases a transaction's connection when its BEGIN, COMMIT or ROLLBACK fails, which is what
 * every transaction cut by a database outage does (kysely-org/kysely#1990): without this, each
 * outage would keep a few pool slots for ever, until requests wait for a connection that never
 * comes, and closing the pool at shutdown hangs.
 */
export function releaseDeadClients(pool: pg.Pool): void {
  const checkedOut = new Set<pg.PoolClient>();
  const watched = new WeakSet<pg.PoolClient>();
  const watch = (client: pg.PoolClient) => {
    watched.add(client);
    client.on("end", () => {
      if (!checkedOut.has(client)) return; // idle: the pool drops it itself
      checkedOut.delete(client);
      // An error makes the pool discard the client; its holder's own release, if it ever comes, is then a no-op.
      client.release(new Error("the database connection ended"));
      client.release = () => undefined;
    });
  };
  // On acquire, not on connect: the connections opened before this was set up are covered too.
  pool.on("acquire", (client) => {
    if (!watched.has(client)) watch(client);
    checkedOut.add(client);
  });
  pool.on("release", (_err, client) => checkedOut.delete(client));
}
