/**
 * Delivery states (spec: pending, processing, delivered, failed) and the moves
 * between them:
 * - pending → processing: a worker starts an attempt;
 * - processing → delivered | pending (retry scheduled) | failed;
 * - processing → processing: a worker takes over the attempt of one that stopped;
 * - pending → failed: the endpoint was disabled.
 * delivered and failed are final; a replay is a new delivery.
 */
export const deliveryStatuses = ["pending", "processing", "delivered", "failed"] as const;
export type DeliveryStatus = (typeof deliveryStatuses)[number];

export function isDeliveryStatus(value: string): value is DeliveryStatus {
  return (deliveryStatuses as readonly string[]).includes(value);
}

const moves: Record<DeliveryStatus, readonly DeliveryStatus[]> = {
  pending: ["processing", "failed"],
  processing: ["processing", "delivered", "pending", "failed"],
  delivered: [],
  failed: [],
};

export function canMove(from: DeliveryStatus, to: DeliveryStatus): boolean {
  return moves[from].includes(to);
}

/** States from which a worker may start an attempt. */
export const attemptable: readonly DeliveryStatus[] = (Object.keys(moves) as DeliveryStatus[]).filter((s) => canMove(s, "processing"));
