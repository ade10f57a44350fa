import type { Status } from "./status.ts";
import { fromUnits, toUnits } from "../vocabulary/amount.ts";
import { findAsset } from "../vocabulary/assets.ts";

/** What an intent's counted funds are, in the asset's smallest units. */
export interface Funds {
  /** Counted, non-orphaned funds of the intent's asset. */
  counted: bigint;
  /** The part of `counted` that became countable after the intent had expired. */
  countedLate: bigint;
}

/** Why an output to an intent's address does not count toward it (the documented reasons). */
export type UncountedReason = "wrong_asset" | "other_method" | "orphaned" | "withdrawn" | "unconfirmed" | "below_confirmations" | "intent_cancelled" | "after_late_window";

/** Why a payment to the intent's address can never count, whatever the chain says: the merchant must act on it (payment.exception). */
export type ExceptionReason = "wrong_asset" | "other_method" | "intent_cancelled" | "after_late_window";

/** What an output must meet to count toward an intent. */
export interface IntentTerms {
  /** Its network; unset: outputs are told apart by asset alone (a caller that knows only one network). */
  network?: string | undefined;
  asset: string;
  /** An intent offering several methods: each, the chosen one (network, asset) included. */
  methods?: readonly { network: string; asset: string }[] | undefined;
  requiredConfirmations: number;
  /** From when a payment no longer counts, and why: its cancellation, or the end of its late-payment window. */
  closes?: { at: Date; reason: "intent_cancelled" | "after_late_window" } | undefined;
}

/** An output as counting weighs it. */
export interface CountedOutput {
  /** Its chain; unset: the intent's (a caller that knows only one). */
  network?: string | undefined;
  asset: string;
  orphaned: boolean;
  confirmations: number;
  mempool?: boolean;
  /** When the core first recorded it. */
  recordedAt?: Date | undefined;
  /** Its block's time (when first recorded in the mempool: that moment). */
  observedAt?: Date | undefined;
}

/**
 * Whether a payment came after its intent stopped taking payments: recorded after the intent was
 * cancelled; or paid (its block's time, or when it was first seen if earlier: a watcher that was
 * down reads it later) after the late-payment window ended.
 */
function afterClose(o: CountedOutput, closes: NonNullable<IntentTerms["closes"]>): boolean {
  if (o.recordedAt === undefined) return false;
  const paidAt = closes.reason === "intent_cancelled" ? o.recordedAt : new Date(Math.min(o.recordedAt.getTime(), (o.observedAt ?? o.recordedAt).getTime()));
  return paidAt.getTime() > closes.at.getTime();
}

/**
 * An output not of the intent's network and asset: of another of its payment methods (the shopper
 * paid a method the intent's first payment did not choose), or of an asset it never offered.
 */
function otherPayment(o: CountedOutput, intent: IntentTerms): "wrong_asset" | "other_method" | undefined {
  const network = o.network ?? intent.network;
  if (o.asset === intent.asset && (intent.network === undefined || network === intent.network)) return undefined;
  return intent.methods?.some((m) => m.network === network && m.asset === o.asset) ? "other_method" : "wrong_asset";
}

/**
 * Whether an output counts toward its intent, and if not why: the intent's asset, not on a block
 * that left the best chain nor withdrawn from the mempool, paid while the intent took payments,
 * with the intent's own confirmation count (an output in the mempool has 0: it counts only for an
 * intent that requires 0). Undefined: it counts.
 */
export function uncountedReason(o: CountedOutput, intent: IntentTerms): UncountedReason | undefined {
  const other = otherPayment(o, intent);
  if (other) return other;
  if (o.orphaned) return o.mempool ? "withdrawn" : "orphaned";
  if (intent.closes && afterClose(o, intent.closes)) return intent.closes.reason;
  if (o.confirmations < intent.requiredConfirmations) return o.mempool ? "unconfirmed" : "below_confirmations";
  return undefined;
}

/** Why a payment is an exception the merchant must act on, if it is one: another asset, or paid after the intent stopped taking payments. */
export function exceptionReason(o: CountedOutput, intent: IntentTerms): ExceptionReason | undefined {
  const other = otherPayment(o, intent);
  if (other) return other;
  if (intent.closes && afterClose(o, intent.closes)) return intent.closes.reason;
  return undefined;
}

/** Funds of the intent's asset seen on the chain that do not count yet: live, below the intent's confirmations. */
export function isPending(o: CountedOutput, intent: IntentTerms): boolean {
  const reason = uncountedReason(o, intent);
  return reason === "unconfirmed" || reason === "below_confirmations";
}

/**
 * Status by counted funds alone, while the intent is payable. Funds short of the requested amount
 * by at most `toleranceBps` basis points of it (rounded down to the asset's unit) confirm it.
 */
export function statusByFunds(requested: bigint, counted: bigint, toleranceBps = 0): Status {
  if (counted === 0n) return "pending";
  if (counted > requested) return "overpaid";
  return counted >= confirmingFloor(requested, toleranceBps) ? "confirmed" : "underpaid";
}

/** The least counted funds that confirm an intent: the requested amount less its tolerance, in the asset's smallest units. */
export function confirmingFloor(requested: bigint, toleranceBps: number): bigint {
  return requested - (requested * BigInt(toleranceBps)) / 10_000n;
}

/**
 * The status an intent's facts imply. The invariant every change keeps, and
 * the property test checks:
 * - cancelled stays cancelled (funds sent to a cancelled intent are recorded, not acted on);
 * - once expired, the intent is late exactly while funds counted after expiry remain;
 * - otherwise the counted funds decide, except that an intent not fully paid
 *   by its expiry is expired.
 * `status` is the current one; `expired` says whether expires_at has passed. An unpaid
 * intent past its expiry is expired by the caller before new funds are weighed (see
 * settle.ts), so funds arriving then are late rather than paying it.
 */
export function impliedStatus(status: Status, requested: bigint, funds: Funds, expired: boolean, toleranceBps = 0): Status {
  if (status === "cancelled") return "cancelled";
  if (status === "expired" || status === "late") return funds.countedLate > 0n ? "late" : "expired";
  const byFunds = statusByFunds(requested, funds.counted, toleranceBps);
  if (expired && (byFunds === "pending" || byFunds === "underpaid")) return "expired";
  return byFunds;
}

/** The statuses in which the shopper may still pay. */
export const payableStatuses: readonly string[] = ["pending", "underpaid"];

/**
 * The funds still due while the intent can be paid (pending, underpaid): requested − received,
 * never below zero; "0" in any other status. The intent's amount_due and the checkout page's.
 */
export function amountDue(view: { status: string; network: string; asset: string; requestedAmount: string; amountReceived?: string | undefined }): string {
  if (!payableStatuses.includes(view.status)) return "0";
  const received = view.amountReceived ?? "0";
  // The asset's decimals; an unknown asset (never, in practice) takes enough for both amounts.
  const decimals =
    findAsset(view.network, view.asset)?.decimals ?? Math.max((view.requestedAmount.split(".")[1] ?? "").length, (received.split(".")[1] ?? "").length);
  const due = toUnits(view.requestedAmount, decimals) - toUnits(received, decimals);
  return fromUnits(due > 0n ? due : 0n, decimals);
}
