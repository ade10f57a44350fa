import { defineEntity, p, type InferEntity } from "@mikro-orm/core";
import { Merchant } from "../auth/entities.ts";

/**
 * A QR configuration: what a printed code offers a payer (public by its id).
 * No network: every supported pair; a network alone: that network's pairs;
 * network and asset: that pair, and then an amount may be fixed.
 */
export const QrConfiguration = defineEntity({
  name: "QrConfiguration",
  tableName: "qr_configurations",
  properties: {
    id: p.string().primary(),
    merchant: () => p.manyToOne(Merchant).deleteRule("cascade"),
    environment: p.string().length(4),
    label: p.string().length(100),
    network: p.string().length(32).nullable(),
    asset: p.string().length(16).nullable(),
    amount: p.decimal("string").columnType("numeric").nullable(),
    createdAt: p.datetime().length(3),
    disabledAt: p.datetime().length(3).nullable(),
  },
});
export type QrConfiguration = InferEntity<typeof QrConfiguration>;
