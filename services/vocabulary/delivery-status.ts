import { deliveryStatuses } from "./value-sets.ts";

/**
 * Delivery states (spec: pending, processing, delivered, failed). Every move between them is made
 * by one module, services/delivery/webhook-deliveries.ts, whose header lists them; here only the
 * words, so that delivery/, webhooks/, events/ and the ops CLI share them without importing each other.
 */
export { deliveryStatuses };
export type DeliveryStatus = (typeof deliveryStatuses)[number];

export function isDeliveryStatus(value: string): value is DeliveryStatus {
  return (deliveryStatuses as readonly string[]).includes(value);
}

/**
 * Delivery statuses that have not ended (pending, a retry waiting included, or processing). Such a
 * delivery keeps its event, and every delivery of it, past EVENT_RETENTION until it ends
 * (events/retention.ts).
 */
export const unfinishedDeliveryStatuses = ["pending", "processing"] as const satisfies readonly DeliveryStatus[];
/** unfinishedDeliveryStatuses as an SQL list, for `status in ${unfinishedSql}`. */
export const unfinishedSql = `(${unfinishedDeliveryStatuses.map((s) => `'${s}'`).join(", ")})`;

export function isUnfinished(status: string): boolean {
  return (unfinishedDeliveryStatuses as readonly string[]).includes(status);
}

/**
 * Why a delivery was made (webhook_deliveries.cause): `event`, when its event was recorded, one per
 * endpoint that takes it; `replay`, a merchant's or an operator's replay of a delivery (replay_of
 * names it); `recovery`, an operator's recovery of the events an endpoint missed. A delivery made
 * again looks like the original otherwise: the cause is what tells them apart.
 */
export const deliveryCauses = ["event", "replay", "recovery"] as const;
export type DeliveryCause = (typeof deliveryCauses)[number];
