import { deliveryStatuses } from "../vocabulary/value-sets.ts";

/**
 * Delivery states (spec: pending, processing, delivered, failed) and the moves
 * between them:
 * - pending → processing: a worker starts an attempt;
 * - processing → delivered | pending (retry scheduled) | failed;
 * - processing → processing: a worker takes over the attempt of one that stopped;
 * - pending → failed: the endpoint was disabled.
 * delivered and failed are final, but for one move: a last attempt the sweep ended
 * failed (worker_lost) while its worker was cut off from the database is recorded as
 * it was answered once that worker's finish lands (failed → delivered | failed).
 * A replay is a new delivery. The statements of delivery/store.ts make these moves,
 * each guarded by the status it moves from.
 */
export { deliveryStatuses };
export type DeliveryStatus = (typeof deliveryStatuses)[number];

export function isDeliveryStatus(value: string): value is DeliveryStatus {
  return (deliveryStatuses as readonly string[]).includes(value);
}
