import type { EventType } from "../vocabulary/event-types.ts";
import { intentStatuses } from "../vocabulary/value-sets.ts";

/**
 * The Payment Intent status machine (DESIGN.md, "Payment Intent"). Every
 * transition emits the event named here, in the transaction that made it.
 */
export const statuses = intentStatuses;
export type Status = (typeof statuses)[number];

export function isStatus(value: string): value is Status {
  return (statuses as readonly string[]).includes(value);
}

const transitions: Record<Status, readonly Status[]> = {
  pending: ["underpaid", "confirmed", "overpaid", "cancelled", "expired"],
  underpaid: ["pending", "confirmed", "overpaid", "expired"],
  // A reorg can take counted funds away again.
  confirmed: ["pending", "underpaid", "overpaid"],
  overpaid: ["pending", "underpaid", "confirmed"],
  cancelled: [],
  expired: ["late"],
  // A reorg can take the late funds away again.
  late: ["expired"],
};

export function canTransition(from: Status, to: Status): boolean {
  return transitions[from].includes(to);
}

/** The event a transition into `to` emits; a move back after a reorg is payment.reorged. */
export function eventFor(from: Status, to: Status): EventType {
  const funded: readonly Status[] = ["underpaid", "confirmed", "overpaid"];
  const lessFunded = to === "pending" || (funded.includes(to) && funded.indexOf(to) < funded.indexOf(from));
  if ((funded.includes(from) && lessFunded) || (from === "late" && to === "expired")) {
    return "payment.reorged";
  }
  switch (to) {
    case "confirmed":
      return "payment.confirmed";
    case "underpaid":
      return "payment.underpaid";
    case "overpaid":
      return "payment.overpaid";
    case "cancelled":
      return "payment.cancelled";
    case "expired":
      return "payment.expired";
    case "late":
      return "payment.late";
    case "pending":
      return "payment.reorged";
  }
}
