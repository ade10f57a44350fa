import { defineEntity, p, type InferEntity } from "@mikro-orm/core";
import { Merchant } from "../auth/entities.ts";

/**
 * The immutable webhook event log. `payload` holds the envelope's JSON bytes,
 * written once: every delivery and replay sends exactly these bytes.
 */
export const WebhookEventRecord = defineEntity({
  name: "WebhookEventRecord",
  tableName: "webhook_events",
  properties: {
    id: p.string().primary(),
    merchant: () => p.manyToOne(Merchant).deleteRule("cascade"),
    environment: p.string().length(4),
    type: p.string().length(64),
    paymentIntentId: p.string().nullable(),
    payload: p.text(),
    createdAt: p.datetime().length(3),
  },
  // created_at alone: the retention job's removal and the oldest event (services/retention).
  indexes: [{ properties: ["merchant", "environment", "createdAt"] }, { properties: ["paymentIntentId"] }, { properties: ["createdAt"] }],
});
export type WebhookEventRecord = InferEntity<typeof WebhookEventRecord>;
