import { randomBytes } from "node:crypto";
import { confirmingFloor } from "../intents/funds.ts";
import type { Owner } from "../auth/keys.ts";
import { checkAmount, fromUnits, toUnits } from "../vocabulary/amount.ts";
import { assetsOn, findAsset } from "../vocabulary/assets.ts";
import { simulateOutcomes } from "../vocabulary/value-sets.ts";
import type { Intents } from "../intents/intents.ts";
import type { IntentRow } from "../intents/store.ts";
import { recordObservation, recordReorg, simulatedTxHash } from "../observations/record.ts";
import { observationsOf } from "../chains/outputs.ts";
import type { EntityManager } from "../platform/db.ts";
import { apiError, validationError } from "../platform/errors.ts";

export type Outcome = (typeof simulateOutcomes)[number];

/** The statuses each outcome can be simulated from. */
const from: Record<Outcome, readonly string[]> = {
  confirmed: ["pending", "underpaid"],
  underpaid: ["pending", "underpaid"],
  overpaid: ["pending", "underpaid", "confirmed"],
  expired: ["pending", "underpaid"],
  late: ["pending", "underpaid", "expired"],
  reorged: ["underpaid", "confirmed", "overpaid", "late"],
  // Seen, not yet confirmed: the intent keeps its status (payment.detected).
  detected: ["pending", "underpaid"],
  // Another asset to the address: it never counts (payment.exception), whatever the status.
  wrong_asset: ["pending", "underpaid", "confirmed", "overpaid", "expired", "late", "cancelled"],
  // A fiat-priced intent's quote lapses now: the requote sweep prices what is due again (payment.requoted).
  quote_lapsed: ["pending", "underpaid"],
};

/** Outcomes that leave the intent's status as it was. */
const keepsStatus: readonly Outcome[] = ["detected", "wrong_asset", "quote_lapsed"];

/**
 * Drives a Test intent to an outcome through the chain watcher's own code:
 * synthetic, confirmed outputs (marked simulated) for payments, the expiry of
 * the scheduler, and a reorg of the latest counted output; an unconfirmed output (detected) and
 * one of another asset of the network (wrong_asset) leave its status. Runs in the caller's
 * transaction: an outcome that does not come about changes nothing.
 */
export async function simulate(tx: EntityManager, intents: Intents, owner: Owner, id: string, outcome: Outcome, amount: string | undefined): Promise<IntentRow> {
  let row = await intents.get(tx, owner, id, true);
  const asset = findAsset(row.network, row.asset);
  // An intent offering several methods none of which is chosen yet: the simulator pays its first
  // (whose network and asset its columns hold until then), which chooses it.
  const depositAddress = row.depositAddress ?? row.methods?.[0]?.depositAddress ?? null;
  if (!asset || depositAddress === null) throw apiError("invalid_state", `Payment intent ${id} has no deposit address to simulate with.`);
  const given = amount === undefined ? undefined : checkAmount(amount, asset.decimals);
  if (given && !given.ok) throw validationError("amount", `"amount" ${given.reason}.`);
  if (!from[outcome].includes(row.status) || (row.status === "underpaid" && outcome === "underpaid" && amount === undefined && remaining(row) <= 1n)) {
    throw apiError("invalid_state", `Payment intent ${id} is ${row.status}; "${outcome}" can be simulated from ${from[outcome].join(", ")}.`);
  }
  let now = new Date();
  const units = (s: string) => toUnits(s, asset.decimals);
  const requested = units(row.requestedAmount);
  const received = row.amountReceived === null ? 0n : units(row.amountReceived);

  if (outcome === "quote_lapsed") {
    if (!row.price) throw apiError("invalid_state", `Payment intent ${id} is priced in its asset: only one priced in a currency has a quote to lapse.`);
    // A millisecond ago, and before the intent expires: the sweep (every second, where rates are read) takes it.
    const lapsed = new Date(Math.min(now.getTime() - 1, row.expiresAt.getTime() - 1));
    await tx.execute(`update payment_intents set quote_expires_at = ? where id = ?`, [lapsed, row.id]);
    return intents.get(tx, owner, id, true);
  }
  if (outcome === "expired" || (outcome === "late" && row.status !== "expired")) {
    await tx.execute(`update payment_intents set expires_at = ? where id = ?`, [now, row.id]);
    row = await intents.expire(tx, { ...row, expiresAt: now }, now);
    if (outcome === "expired") return row;
    // The late payment's event follows the expiry's, a millisecond on.
    now = new Date(now.getTime() + 1);
  }
  if (outcome === "reorged") {
    const counted = (await observationsOf(tx, row.id)).filter((o) => o.counted);
    const latest = counted[counted.length - 1];
    if (!latest) throw apiError("invalid_state", `Payment intent ${id} has no counted funds to reorg.`);
    const result = await recordReorg(tx, intents, row.network, "test", [], [latest.txHash], now);
    return result.intents[0] ?? row;
  }

  // The asset paid: another of the network's for wrong_asset (its amount in that asset's units).
  const paid = outcome === "wrong_asset" ? otherAsset(row.network, row.asset) : asset;
  if (!paid) throw apiError("invalid_state", `${row.network} has no asset but ${row.asset} to simulate a wrong-asset payment with.`);
  let pay: bigint;
  if (outcome === "wrong_asset") {
    const amountGiven = given?.ok ? given.value : "1";
    const checked = checkAmount(amountGiven, paid.decimals);
    if (!checked.ok) throw validationError("amount", `"amount" ${checked.reason} (in ${paid.asset}).`);
    pay = toUnits(checked.value, paid.decimals);
  } else if (given?.ok) {
    pay = units(given.value);
  } else if (outcome === "detected") {
    pay = requested - received > 0n ? requested - received : 1n;
  } else {
    pay = {
      confirmed: requested - received,
      // Half of what is still short of confirming it (its tolerance counts).
      underpaid: (confirmingFloor(requested, row.underpaymentToleranceBps) - received) / 2n,
      overpaid: (requested * 11n + 9n) / 10n - received,
      late: requested,
    }[outcome];
    if (pay <= 0n) pay = 1n;
  }
  const result = await recordObservation(
    tx,
    intents,
    {
      network: row.network,
      environment: "test",
      asset: paid.asset,
      toAddress: depositAddress,
      txHash: simulatedTxHash(row.network),
      outputIndex: 0,
      amount: fromUnits(pay, paid.decimals),
      confirmations: outcome === "detected" ? 0 : intents.confirmationsOf(row),
      blockHeight: null,
      blockHash: randomBytes(32).toString("hex"),
      observedAt: now,
    },
    true,
    now,
  );
  const settled = result.intent ?? row;
  if (!keepsStatus.includes(outcome) && settled.status !== outcome) {
    // Thrown inside the transaction: the output and any move roll back.
    throw validationError("amount", `An amount of ${fromUnits(pay, asset.decimals)} would make the intent ${settled.status}, not ${outcome}.`);
  }
  return settled;
}

/** An asset of the network other than `symbol`: its native coin first. */
function otherAsset(network: string, symbol: string) {
  return assetsOn(network)
    .filter((a) => a !== symbol)
    .map((a) => findAsset(network, a))
    .sort((a, b) => Number(b?.contract === undefined) - Number(a?.contract === undefined))[0];
}

/** What the intent is still short of confirming, in units: an underpaid one this close cannot stay underpaid by a default amount. */
function remaining(row: IntentRow): bigint {
  const decimals = findAsset(row.network, row.asset)?.decimals ?? 0;
  return confirmingFloor(toUnits(row.requestedAmount, decimals), row.underpaymentToleranceBps) - (row.amountReceived === null ? 0n : toUnits(row.amountReceived, decimals));
}
