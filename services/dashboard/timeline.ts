/**
 * A payment's history in words a shop owner reads: each event as one sentence ("Payment
 * detected: 0.0079 ETH in tx 0xabc… (1 of 12 confirmations)"), and each exception with what to do
 * next. The sentences are made from the event's own data (the intent as it was then), so a step
 * says what was true at that moment, not what is true now. The raw event stays one click away.
 */
import type { JsonValue } from "@bufbuild/protobuf";
import { escapeHtml as e } from "../checkout/page.ts";
import { fromUnits, toUnits } from "../vocabulary/amount.ts";
import { findAsset } from "../vocabulary/assets.ts";

/** The intent in an event's data (snake_case, as delivered); every field may be missing in an old event. */
interface IntentData {
  asset?: string;
  network?: string;
  status?: string;
  requested_amount?: string;
  amount_received?: string;
  amount_due?: string;
  price_amount?: string;
  price_currency?: string;
  required_confirmations?: number;
  expires_at?: string;
  quote?: { rate?: string };
  transactions?: TxData[];
}

interface TxData {
  tx_hash?: string;
  amount?: string;
  asset?: string;
  confirmations?: number;
  counted?: boolean;
  fiat_value?: string;
}

const isDecimal = (s: string | undefined): s is string => s !== undefined && /^\d+(\.\d+)?$/.test(s);
const fractionDigits = (s: string) => (s.split(".")[1] ?? "").length;

/** Decimal strings added without floating point; undefined when one is not a plain decimal. */
function sum(values: (string | undefined)[]): string | undefined {
  if (!values.every(isDecimal)) return undefined;
  const digits = Math.max(0, ...values.map((v) => fractionDigits(v as string)));
  return fromUnits(values.reduce((n, v) => n + toUnits(v as string, digits), 0n), digits);
}

/** a − b for decimal strings (never below zero); undefined when either is not a plain decimal. */
export function difference(a: string | undefined, b: string | undefined): string | undefined {
  if (!isDecimal(a) || !isDecimal(b)) return undefined;
  const digits = Math.max(fractionDigits(a), fractionDigits(b));
  const d = toUnits(a, digits) - toUnits(b, digits);
  return fromUnits(d > 0n ? d : 0n, digits);
}

/** A fiat amount as a price is written: two decimals ("5.00"). */
function money(value: string): string {
  const [whole, fraction = ""] = value.split(".");
  return `${whole}.${fraction.padEnd(2, "0")}`;
}

/** A hash short enough for a sentence: its start and end ("0x3f9a1c…7be2"); the whole one is on the page's transactions. */
export function shortHash(hash: string): string {
  return hash.length > 16 ? `${hash.slice(0, 10)}…${hash.slice(-4)}` : hash;
}

/** "5.00 of 19.99 USD received" for a priced intent whose counted payments were valued, else in the asset. */
function receivedOf(pi: IntentData): string {
  const asset = pi.asset ?? "";
  const counted = (pi.transactions ?? []).filter((t) => t.counted && t.asset === pi.asset);
  const fiat = pi.price_amount && counted.length > 0 ? sum(counted.map((t) => t.fiat_value)) : undefined;
  if (fiat !== undefined && pi.price_amount && pi.price_currency) return `${money(fiat)} of ${money(pi.price_amount)} ${pi.price_currency} received`;
  return `${pi.amount_received ?? "0"} of ${pi.requested_amount ?? "?"} ${asset} received`;
}

/** The transaction a "detected" step speaks of: the newest of the intent's asset. */
function latestOfAsset(pi: IntentData): TxData | undefined {
  return (pi.transactions ?? []).filter((t) => t.asset === pi.asset).at(-1);
}

function txPhrase(t: TxData, required: number | undefined): string {
  const confirmations = required ? ` (${t.confirmations ?? 0} of ${required} confirmations)` : "";
  return `${t.amount ?? "?"} ${t.asset ?? ""} in tx ${shortHash(t.tx_hash ?? "")}${confirmations}`;
}

const exceptionWords: Readonly<Record<string, string>> = {
  wrong_asset: "Wrong asset received",
  other_method: "Paid by another method",
  intent_cancelled: "Paid after the payment was cancelled",
  after_late_window: "Paid after the late-payment window",
};

/** One event as a sentence (plain text; the caller escapes it). An unknown type is named as it is. */
export function stepSentence(type: string, data: JsonValue): string {
  const d = (data && typeof data === "object" && !Array.isArray(data) ? data : {}) as {
    payment_intent?: IntentData;
    exception?: { reason?: string; transaction?: TxData };
    refund?: { id?: string; amount?: string; asset?: string; network?: string; address?: string; status?: string };
  };
  const rf = d.refund ?? {};
  const refunded = `${rf.amount ?? "?"} ${rf.asset ?? ""} on ${rf.network ?? "?"}`;
  const pi = d.payment_intent ?? {};
  const asset = pi.asset ?? "";
  const priced = pi.price_amount && pi.price_currency ? `${money(pi.price_amount)} ${pi.price_currency}, ` : "";
  switch (type) {
    case "payment.intent.created":
      return `Payment created: ${priced}${pi.requested_amount ?? "?"} ${asset} to pay on ${pi.network ?? "?"}`;
    case "payment.detected": {
      const t = latestOfAsset(pi);
      return t ? `Payment detected: ${txPhrase(t, pi.required_confirmations)}` : "Payment detected";
    }
    case "payment.confirmed":
      return `Confirmed: ${pi.amount_received ?? pi.requested_amount ?? "?"} ${asset} received`;
    case "payment.underpaid":
      return `Underpaid: ${receivedOf(pi)}`;
    case "payment.overpaid":
      return `Overpaid: ${pi.amount_received ?? "?"} ${asset} received for ${pi.requested_amount ?? "?"} ${asset} asked`;
    case "payment.late":
      return `Paid late: ${pi.amount_received ?? "?"} ${asset} counted after the payment had expired`;
    case "payment.expired":
      return isDecimal(pi.amount_received) && toUnits(pi.amount_received, fractionDigits(pi.amount_received)) > 0n ? `Expired: ${receivedOf(pi)}` : "Expired: nothing was received in time";
    case "payment.cancelled":
      return "Cancelled";
    case "payment.reorged":
      return `Reorganised: the chain took a transaction back; the payment is ${pi.status ?? "pending"} again`;
    case "payment.valued":
      return "Valued: a payment seen while no exchange rate was available now has its value";
    case "payment.requoted":
      return `Quoted again: ${pi.requested_amount ?? "?"} ${asset} asked in all${pi.quote?.rate ? `, at ${pi.quote.rate} ${pi.price_currency ?? ""} a unit` : ""}`;
    case "refund.created":
      return `Refund created: ${refunded} (${rf.id ?? ""})${rf.address ? "" : ", waiting for the customer's address"}`;
    case "refund.address_received":
      return `Refund address received: send ${refunded} to ${rf.address ?? "?"}`;
    case "refund.sent":
      return `Refund sent: ${refunded} seen at the customer's address`;
    case "refund.completed":
      return `Refund completed: ${refunded} confirmed at the customer's address`;
    case "refund.reorged":
      return `Refund reorganised: the chain took its transfer back; it is ${(rf.status ?? "awaiting_payment").replace(/_/g, " ")} again`;
    case "refund.cancelled":
      return `Refund cancelled: ${refunded}`;
    case "payment.exception": {
      const x = d.exception ?? {};
      const head = exceptionWords[x.reason ?? ""] ?? `Exception (${(x.reason ?? "unknown").replace(/_/g, " ")})`;
      const t = x.transaction;
      if (x.reason === "wrong_asset" && t) return `${head}: ${t.asset ?? "?"} sent to a ${asset} payment (${t.amount ?? "?"} ${t.asset ?? ""} in tx ${shortHash(t.tx_hash ?? "")})`;
      return t ? `${head}: ${t.amount ?? "?"} ${t.asset ?? ""} in tx ${shortHash(t.tx_hash ?? "")}` : head;
    }
    case "webhook.test":
      return "Test event";
    default:
      return type;
  }
}

/** What an exception's advice needs of the intent (a PaymentIntent message has it). */
export interface AdviceIntent {
  /** Unset on an intent offering several methods until a payment chose one. */
  asset?: string | undefined;
  requestedAmount?: string | undefined;
  amountReceived?: string | undefined;
  amountDue?: string | undefined;
}

/**
 * One line for each exception reason: what the shop does next. Refunds are not made by this
 * service (yet): the money is in the merchant's own wallet, so the advice says to send it back from there.
 */
export function exceptionAdvice(reason: string, pi: AdviceIntent): string {
  switch (reason) {
    case "underpaid":
      return `Ask the shopper to send the remaining ${pi.amountDue ?? ""} ${pi.asset ?? ""} to the same address, or refund what was received from your wallet.`;
    case "overpaid": {
      const extra = difference(pi.amountReceived, pi.requestedAmount ?? "0");
      return `Refund the extra ${extra ?? "amount"} ${pi.asset} to the shopper from your wallet, or agree with them to keep it.`;
    }
    case "late":
      return "The money arrived after the payment expired: fulfil the order if you still can, or refund it from your wallet.";
    case "other_method":
      return `A payment by another of this payment's methods does not count once one was chosen: refund it from your wallet on the chain and in the asset it came in.`;
    case "wrong_asset":
      return `A payment in another asset does not count: refund it from your wallet in the asset it came in, and ask the shopper to pay in ${pi.asset}.`;
    case "intent_cancelled":
      return "The money arrived after the payment was cancelled: refund it from your wallet, or fulfil the order and record the payment yourself.";
    case "after_late_window":
      return "The money arrived too late to count: refund it from your wallet, or fulfil the order and record the payment yourself.";
    case "reorged":
      return "The chain took a transaction back: hold the order until the payment shows confirmed again, and ask the shopper to pay again if it does not.";
    default:
      return "Check the payment's transactions and timeline, then refund from your wallet or ask the shopper to complete the payment.";
  }
}

/** The advice of every reason, as a list (one reason: one line). */
export function adviceList(reasons: readonly string[], pi: AdviceIntent, id?: string): string {
  if (reasons.length === 0) return "";
  return `<ul class="advice"${id ? ` id="${e(id)}"` : ""}>${reasons.map((r) => `<li>${e(exceptionAdvice(r, pi))}</li>`).join("")}</ul>`;
}
