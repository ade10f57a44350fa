/**
 * What a refund of an intent may give back, and how much a request means (pure: refunds.ts reads
 * the rows under the intent's lock and calls these). Never more than was received: per network and
 * asset, the refunds not cancelled sum to at most what the intent received in it.
 */
import { findAsset } from "../vocabulary/assets.ts";
import { fromUnits, toUnits } from "../vocabulary/amount.ts";

export const refundStatuses = ["awaiting_address", "awaiting_payment", "sent", "completed", "cancelled"] as const;
export type RefundStatus = (typeof refundStatuses)[number];

/** An output of the intent a refund may give back (store.ts refundableOutputs). */
export interface ReceivedOutput {
  network: string;
  asset: string;
  txHash: string;
  outputIndex: number;
  amount: string;
  /** Counted toward the intent; else an exception told to the merchant. */
  counted: boolean;
}

/** A refund already made of the intent, as far as the sum goes. */
export interface RefundTaken {
  network: string;
  asset: string;
  amount: string;
  status: RefundStatus;
}

/** Why a request cannot be a refund: the field at fault and what to say. */
export type Refusal = { refused: "validation"; param: string; message: string } | { refused: "state" | "exceeds"; message: string };

const nameOf = (o: { network: string; asset: string }) => `${o.asset} on ${o.network}`;

/**
 * The output a request refunds: the one `payment` names ("tx_hash" or "tx_hash:output_index"), or,
 * unnamed, the intent's only asset's first. Several assets (or networks) received: `payment` is required.
 */
export function chooseOutput(outputs: readonly ReceivedOutput[], payment: string | undefined): ReceivedOutput | Refusal {
  if (outputs.length === 0) return { refused: "state", message: "The payment intent has received nothing that can be refunded: a refund needs a payment that counted, or one told as an exception, in a block." };
  if (payment !== undefined) {
    const m = /^([^:]+)(?::(\d{1,9}))?$/.exec(payment.trim());
    const found = m && outputs.find((o) => o.txHash.toLowerCase() === (m[1] as string).toLowerCase() && (m[2] === undefined || o.outputIndex === Number(m[2])));
    if (!found) return { refused: "validation", param: "payment", message: `"payment" names no transaction this payment intent received that can be refunded ("tx_hash" or "tx_hash:output_index", as its transactions show them).` };
    return found;
  }
  const kinds = [...new Map(outputs.map((o) => [`${o.network}/${o.asset}`, o])).values()];
  if (kinds.length > 1) {
    return { refused: "validation", param: "payment", message: `"payment" is missing: the payment intent received ${kinds.map(nameOf).join(" and ")}; name the transaction to refund.` };
  }
  return outputs[0] as ReceivedOutput;
}

/** What the intent received in the output's network and asset, what its refunds not cancelled take, and what is left, in the asset's smallest units. */
export function refundable(outputs: readonly ReceivedOutput[], refunds: readonly RefundTaken[], of: { network: string; asset: string }, decimals: number): { received: bigint; taken: bigint; left: bigint } {
  const same = (o: { network: string; asset: string }) => o.network === of.network && o.asset === of.asset;
  const received = outputs.filter(same).reduce((n, o) => n + toUnits(o.amount, decimals), 0n);
  const taken = refunds.filter((r) => same(r) && r.status !== "cancelled").reduce((n, r) => n + toUnits(r.amount, decimals), 0n);
  return { received, taken, left: received - taken };
}

/** The intent as far as a refund's default amount goes. */
export interface IntentFacts {
  status: string;
  network: string;
  asset: string;
  requestedAmount: string;
  amountReceived: string | null;
}

/**
 * The amount a request with none means, in units: everything left of an exception's asset, or of
 * a cancelled or expired intent; the overpaid part (less what refunds took already) of an
 * overpaid one. Any other intent needs an amount.
 */
export function defaultAmount(intent: IntentFacts, output: ReceivedOutput, left: bigint, taken: bigint, decimals: number): bigint | Refusal {
  if (!output.counted || intent.status === "cancelled" || intent.status === "expired") return left;
  if (intent.status === "overpaid") {
    const over = toUnits(intent.amountReceived ?? "0", decimals) - toUnits(intent.requestedAmount, decimals);
    return over - taken;
  }
  return { refused: "validation", param: "amount", message: `"amount" is missing: the payment intent is ${intent.status}, so a refund says how much (amount, or price_amount with price_currency); with none, only an overpaid intent's overpaid part, an exception's payment or a cancelled or expired intent's funds are refunded.` };
}

/** The refusal of an amount past what is left. */
export function exceeds(of: { network: string; asset: string }, decimals: number, x: { received: bigint; taken: bigint; left: bigint }): Refusal {
  const s = (n: bigint) => fromUnits(n < 0n ? 0n : n, decimals);
  return {
    refused: "exceeds",
    message: `At most ${s(x.left)} ${of.asset} is still refundable on ${of.network}: the payment intent received ${s(x.received)} ${of.asset} there and its refunds not cancelled take ${s(x.taken)}.`,
  };
}

/** `price` in a currency as the asset's units at `rate` (units of the currency per unit of the asset), rounded down. */
export function priceToUnits(price: string, rate: string, decimals: number): bigint {
  const scale = 18;
  const p = toUnits(price, scale);
  const r = toUnits(rate, scale);
  return r === 0n ? 0n : (p * 10n ** BigInt(decimals)) / r;
}

/** The asset's decimals, or throws: a refund is only ever of an asset the table knows. */
export function decimalsOf(network: string, asset: string): number {
  const info = findAsset(network, asset);
  if (!info) throw new Error(`a refund of an unknown asset ${network}/${asset}`);
  return info.decimals;
}
