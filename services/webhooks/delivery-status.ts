import { deliveryStatuses } from "../vocabulary/value-sets.ts";

/**
 * Delivery states (spec: pending, processing, delivered, failed) and the moves
 * between them:
 * - pending → processing: a worker starts an attempt;
 * - processing → delivered | pending (retry scheduled) | failed;
 * - processing → processing: a worker takes over the attempt of one that stopped;
 * - pending → failed: the endpoint was disabled.
 * delivered and failed are final; a replay is a new delivery. The statements of
 * store.ts make these moves, each guarded by the status it moves from.
 */
export { deliveryStatuses };
export type DeliveryStatus = (typeof deliveryStatuses)[number];

export function isDeliveryStatus(value: string): value is DeliveryStatus {
  return (deliveryStatuses as readonly string[]).includes(value);
}
