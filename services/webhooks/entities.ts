import { defineEntity, p, type InferEntity } from "@mikro-orm/core";
import { Merchant } from "../auth/entities.ts";

/**
 * A merchant's webhook endpoint. The signing secret is stored only as
 * AES-256-GCM ciphertext (see secrets.ts) and is never read back by the API.
 */
export const WebhookEndpointRecord = defineEntity({
  name: "WebhookEndpointRecord",
  tableName: "webhook_endpoints",
  properties: {
    id: p.string().primary(),
    merchant: () => p.manyToOne(Merchant).deleteRule("cascade"),
    environment: p.string().length(4),
    url: p.string().length(2048),
    description: p.string().length(256).nullable(),
    status: p.string().length(16),
    secretCiphertext: p.blob(),
    /** The secret a rotation replaced, still signing alongside the new one until previousSecretExpiresAt. */
    previousSecretCiphertext: p.blob().nullable(),
    previousSecretExpiresAt: p.datetime().length(3).nullable(),
    /** Why the endpoint stopped: "auto_disabled" when every delivery failed for WEBHOOK_AUTO_DISABLE_AFTER_SECONDS. */
    lastError: p.string().length(64).nullable(),
    createdAt: p.datetime().length(3),
    disabledAt: p.datetime().length(3).nullable(),
    // When an operator last enabled it again (admin endpoint enable): failures before it no longer count towards auto-disable.
    enabledAt: p.datetime().length(3).nullable(),
    /** The event types it receives (Stripe's enabled_events): "*" for every type. */
    enabledEvents: p.array<string>().defaultRaw("'{*}'"),
  },
  indexes: [{ properties: ["merchant", "environment", "createdAt", "id"] }, { properties: ["merchant", "environment", "status"] }],
});
export type WebhookEndpointRecord = InferEntity<typeof WebhookEndpointRecord>;

/**
 * The one row saying which key the signing secrets are sealed under: its id and key check value
 * (an HMAC of a fixed label under the key, never the key). A process given another key refuses to start.
 */
export const SecretKeyCheck = defineEntity({
  name: "SecretKeyCheck",
  tableName: "secret_key_check",
  properties: {
    id: p.smallint().primary().autoincrement(false),
    keyId: p.string().length(16),
    checkValue: p.string().length(64),
    updatedAt: p.datetime().length(3),
  },
});
export type SecretKeyCheck = InferEntity<typeof SecretKeyCheck>;
