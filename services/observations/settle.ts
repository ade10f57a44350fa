import { fromUnits, toUnits } from "../vocabulary/amount.ts";
import { findAsset } from "../vocabulary/assets.ts";
import type { Intents } from "../intents/intents.ts";
import { impliedStatus, statusByFunds, uncountedReason, type Funds } from "../intents/settle.ts";
import { isStatus } from "../intents/status.ts";
import { updateAmountReceived, type IntentRow } from "../intents/store.ts";
import type { EntityManager } from "../platform/db.ts";
import { observationsOf, setCounted, toFact } from "./store.ts";

/**
 * Brings a locked intent in line with its outputs: decides which count (the
 * intent's asset, the network's confirmations, not orphaned), saves
 * amount_received, and moves the status to what the funds and expiry imply —
 * each move through intents.transition(), so each emits its event once, in
 * the caller's transaction.
 */
export async function settle(tx: EntityManager, intents: Intents, locked: IntentRow, now: Date): Promise<IntentRow> {
  const asset = findAsset(locked.network, locked.asset);
  if (!asset) throw new Error(`intent ${locked.id} has an unknown asset`);
  const required = intents.confirmationsOf(locked);
  let row = locked;
  const expired = now.getTime() >= row.expiresAt.getTime();
  // Past its expiry an unpaid intent is expired, whether or not the scheduler got there first:
  // funds that count from now on are late.
  const expireFirst = expired && (row.status === "pending" || row.status === "underpaid");
  const lateFromNow = expireFirst || row.status === "expired" || row.status === "late";

  const outputs = await observationsOf(tx, row.id);
  const changes: { id: number; counted: boolean; countedLate: boolean }[] = [];
  const funds: Funds = { counted: 0n, countedLate: 0n };
  for (const o of outputs) {
    const counts = uncountedReason(o, { asset: row.asset, requiredConfirmations: required }) === undefined;
    const late = counts && (o.counted ? o.countedLate : lateFromNow);
    if (counts !== o.counted || late !== o.countedLate) {
      changes.push({ id: o.id, counted: counts, countedLate: late });
      o.counted = counts;
      o.countedLate = late;
    }
    if (counts) {
      const units = toUnits(o.amount, asset.decimals);
      funds.counted += units;
      if (late) funds.countedLate += units;
    }
  }
  await setCounted(tx, changes, now);
  const amountReceived = outputs.length > 0 ? fromUnits(funds.counted, asset.decimals) : null;
  if (amountReceived !== null && amountReceived !== row.amountReceived) await updateAmountReceived(tx, row.id, amountReceived, now);
  row = { ...row, amountReceived, transactions: outputs.map(toFact) };

  // Each move of one settlement gets its own millisecond, so its events order by created_at.
  let moves = 0;
  const at = () => new Date(now.getTime() + moves++);
  if (expireFirst) row = await intents.expire(tx, row, at());
  if (!isStatus(row.status)) return row;
  const requested = toUnits(row.requestedAmount, asset.decimals);
  const tolerance = row.underpaymentToleranceBps;
  const target = impliedStatus(row.status, requested, funds, expired, tolerance);
  if (target === row.status) return row;
  if (target === "expired" && row.status !== "late") {
    // A reorg took funds from an intent past its expiry: first back to what the funds say
    // (payment.reorged), then expired like any unpaid intent (payment.expired).
    const byFunds = statusByFunds(requested, funds.counted, tolerance);
    if (byFunds !== row.status) row = await intents.transition(tx, row, byFunds, at());
  }
  return intents.transition(tx, row, target, at());
}
