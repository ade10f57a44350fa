import { recordEvent } from "../events/record.ts";
import type { EntityManager } from "../platform/db.ts";
import { apiError } from "../platform/errors.ts";
import { toEventData, toMessage, type IntentRow } from "./intent-message.ts";
import { canTransition, eventFor, isStatus, type Status } from "./status.ts";
import { updateStatus } from "./store.ts";

/**
 * The one way an intent changes status: checked against the status machine,
 * applied only if nobody changed it meanwhile, and recorded as its event in
 * the same transaction (the caller's).
 */
export async function transition(em: EntityManager, row: IntentRow, to: Status, checkoutBaseUrl: string, at = new Date()): Promise<IntentRow> {
  const from = row.status;
  if (!isStatus(from) || !canTransition(from, to)) {
    throw apiError("invalid_state", `Payment intent ${row.id} is ${from}; it cannot become ${to}.`);
  }
  if (!(await updateStatus(em, row.id, from, to, at))) {
    throw apiError("invalid_state", `Payment intent ${row.id} changed while this request ran; read it again.`);
  }
  const next = { ...row, status: to };
  await recordEvent(em, {
    merchantId: row.merchantId,
    environment: row.environment === "live" ? "live" : "test",
    type: eventFor(from, to),
    data: toEventData(toMessage(next, checkoutBaseUrl)),
    paymentIntentId: row.id,
    createdAt: at,
  });
  return next;
}
