import { defineEntity, p, type InferEntity } from "@mikro-orm/core";
import { Merchant } from "../auth/entities.ts";

/**
 * A Payment Intent. `id` is its public identifier. Lists page newest first
 * on (created_at, id), so every filter has an index in that order.
 */
export const PaymentIntentRecord = defineEntity({
  name: "PaymentIntentRecord",
  tableName: "payment_intents",
  properties: {
    id: p.string().primary(),
    merchant: () => p.manyToOne(Merchant).deleteRule("cascade"),
    environment: p.string().length(4),
    status: p.string().length(16),
    merchantReference: p.string().length(128).nullable(),
    network: p.string().length(32),
    asset: p.string().length(16),
    requestedAmount: p.decimal("string").columnType("numeric"),
    metadata: p.json<Record<string, string>>(),
    createdAt: p.datetime().length(3),
    expiresAt: p.datetime().length(3),
    updatedAt: p.datetime().length(3),
  },
  indexes: [
    { properties: ["merchant", "environment", "createdAt", "id"] },
    { properties: ["merchant", "environment", "status", "createdAt", "id"] },
    { properties: ["merchant", "environment", "merchantReference", "createdAt", "id"] },
    { properties: ["status", "expiresAt"] },
  ],
});
export type PaymentIntentRecord = InferEntity<typeof PaymentIntentRecord>;
