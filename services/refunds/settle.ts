/**
 * A refund's status from the transfers recorded at its address (pure: refunds.ts settleChain reads
 * them under the refund's lock). Sent once live transfers reach its amount; completed once those
 * in blocks with the asset's confirmations do; back to awaiting_payment when a reorg takes them.
 */
import { toUnits } from "../vocabulary/amount.ts";
import type { RefundStatus } from "./refundable.ts";
import type { RecordedTransfer } from "./store.ts";

export function settleRefund(
  r: { status: RefundStatus; amount: string },
  transfers: readonly RecordedTransfer[],
  decimals: number,
  required: number,
): { status: RefundStatus; live: RecordedTransfer[] } {
  const live = transfers.filter((t) => !t.orphaned);
  const sum = (list: readonly RecordedTransfer[]) => list.reduce((n, t) => n + toUnits(t.amount, decimals), 0n);
  const due = toUnits(r.amount, decimals);
  const confirmed = live.filter((t) => !t.mempool && t.confirmations >= required);
  const status: RefundStatus = sum(confirmed) >= due ? "completed" : sum(live) >= due ? "sent" : "awaiting_payment";
  return { status, live };
}

/** What is still to send: the amount less the live transfers (never below zero), in units. */
export function unitsDue(amount: string, transfers: readonly { amount: string }[], decimals: number): bigint {
  const left = toUnits(amount, decimals) - transfers.reduce((n, t) => n + toUnits(t.amount, decimals), 0n);
  return left < 0n ? 0n : left;
}
