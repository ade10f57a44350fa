import { fromUnits, toUnits } from "../vocabulary/amount.ts";
import { findAsset } from "../vocabulary/assets.ts";
import { findCurrency } from "../vocabulary/currencies.ts";
import { amountForPrice, parseRate } from "../rates/rate-math.ts";
import { uncountedReason, type CountedOutput, type IntentTerms } from "./funds.ts";
import type { IntentPrice, QuoteEntry } from "./pricing.ts";
import type { IntentRow } from "./store.ts";

/**
 * A fiat-priced intent's quotes over its life, as pure functions (no I/O): a quote holds for
 * QUOTE_SECONDS (at most until the intent expires), after which the requote sweep (requote.ts)
 * prices what is still due at the rate of the moment. Each payment counts at the quote in force
 * when it was paid; one paid within QUOTE_GRACE_SECONDS after a quote was replaced may count at
 * the replaced one. What the intent asks for (requested_amount) follows from its quotes and the
 * payments each took, the one rule below (requestedUnits), so settlement, the sweep and a reorg
 * always agree on it.
 */

/** QUOTE_SECONDS and QUOTE_GRACE_SECONDS. */
export interface QuoteTerms {
  /** How long a quote holds (capped at the intent's expiry). */
  seconds: number;
  /** How long after a quote was replaced a payment may still count at it. */
  graceSeconds: number;
}

/** 15 minutes, as long as an intent's default lifetime, and 2 minutes of grace. */
export const defaultQuoteTerms: QuoteTerms = { seconds: 900, graceSeconds: 120 };

/** When a quote made at `quotedAt` lapses: QUOTE_SECONDS on, or the intent's expiry if sooner. */
export function quoteExpiry(quotedAt: Date, intentExpiresAt: Date, seconds: number): Date {
  return new Date(Math.min(quotedAt.getTime() + seconds * 1000, intentExpiresAt.getTime()));
}

/** Every quote of the intent, oldest first: the replaced ones, then the current one. */
export function quotesOf(price: IntentPrice): QuoteEntry[] {
  return [...price.history, { rate: price.rate, sources: price.sources, quotedAt: price.quotedAt, expiresAt: price.expiresAt }];
}

/** An output as the quotes weigh it: when it was paid, how much, and whether it stands. */
export interface QuotedOutput extends CountedOutput {
  amount: string;
}

/**
 * When an output was paid: when the core first recorded it, or its block's time (or first sight in
 * the mempool) if earlier (a watcher that was down reads it later), as the late-payment window
 * reads it (funds.ts). `fallback` for one not recorded yet: the settlement's moment.
 */
export function paidAt(o: { recordedAt?: Date | undefined; observedAt?: Date | undefined }, fallback: Date): Date {
  const recorded = o.recordedAt ?? fallback;
  return o.observedAt && o.observedAt.getTime() < recorded.getTime() ? o.observedAt : recorded;
}

/**
 * The quote (its index in quotesOf) a payment made at `at` counts at: the one in force then (a
 * quote is in force from its quoted_at until another replaces it, lapsed or not), or, paid within
 * the grace after it replaced another, that one when the intent's decision for that grace says so.
 */
export function quoteIndexAt(quotes: readonly QuoteEntry[], at: Date, graceMs: number): number {
  let k = 0;
  for (let i = 1; i < quotes.length; i++) {
    if ((quotes[i] as QuoteEntry).quotedAt.getTime() <= at.getTime()) k = i;
    else break;
  }
  if (k > 0 && at.getTime() < (quotes[k] as QuoteEntry).quotedAt.getTime() + graceMs && quotes[k - 1]?.grace === "taken") return k - 1;
  return k;
}

/** Outputs that stand toward the intent: of its asset, counting or on their way to it (seen, short of confirmations). */
export function standing<T extends QuotedOutput>(outputs: readonly T[], terms: IntentTerms): T[] {
  return outputs.filter((o) => {
    const reason = uncountedReason(o, terms);
    return reason === undefined || reason === "unconfirmed" || reason === "below_confirmations";
  });
}

const ceilDiv = (a: bigint, b: bigint) => (a + b - 1n) / b;

/**
 * What the intent asks for in all, in the asset's smallest units, given what each of its quotes
 * took (`took[k]`, units of the payments that count at quote k): the first quote asks the price at
 * its rate (rounded up, as at creation); what a quote still left due when it was replaced is
 * carried to the next at the two quotes' rates (its value at the old rate, priced at the new one,
 * rounded up); once what a quote asked is paid, nothing is carried and later quotes change
 * nothing (an overpayment stays as it was paid). The total is what the earlier quotes took plus
 * what the current one asks. One quote: the amount computed at creation, whatever was paid.
 */
export function requestedUnits(price: IntentPrice, quotes: readonly QuoteEntry[], took: readonly bigint[], currencyDecimals: number, assetDecimals: number): bigint | undefined {
  const rates = quotes.map((q) => parseRate(q.rate));
  if (rates.some((r) => r === undefined) || rates.length === 0) return undefined;
  let due = toUnits(amountForPrice(price.amount, currencyDecimals, rates[0] as bigint, assetDecimals), assetDecimals);
  let before = 0n;
  for (let k = 0; k < quotes.length - 1; k++) {
    const paid = took[k] ?? 0n;
    const left = due - paid;
    before += paid;
    due = left > 0n ? ceilDiv(left * (rates[k] as bigint), rates[k + 1] as bigint) : left;
  }
  return before + due;
}

/** Units of the standing outputs, by the quote each counts at. */
function tookByQuote(quotes: readonly QuoteEntry[], outputs: readonly QuotedOutput[], decimals: number, graceMs: number, now: Date): bigint[] {
  const took = quotes.map(() => 0n);
  for (const o of outputs) {
    const k = quoteIndexAt(quotes, paidAt(o, now), graceMs);
    took[k] = (took[k] as bigint) + toUnits(o.amount, decimals);
  }
  return took;
}

function decimalsOf(row: IntentRow): { asset: number; currency: number } | undefined {
  const asset = findAsset(row.network, row.asset);
  const currency = row.price && findCurrency(row.price.currency);
  return asset && currency ? { asset: asset.decimals, currency: currency.decimals } : undefined;
}

/**
 * The requested amount of a re-quoted intent by its quotes and its standing outputs (what counts,
 * and what is on its way: a payment seen under a quote keeps that quote's due paid while it
 * confirms, so a re-quote does not ask the shopper again for it); undefined for an intent that
 * was never re-quoted (its amount is the one computed at creation) or not fiat-priced.
 */
export function requestedByQuotes(row: IntentRow, outputs: readonly QuotedOutput[], terms: IntentTerms, graceMs: number, now: Date): string | undefined {
  if (!row.price || row.price.history.length === 0) return undefined;
  const d = decimalsOf(row);
  if (!d) return undefined;
  const quotes = quotesOf(row.price);
  const units = requestedUnits(row.price, quotes, tookByQuote(quotes, standing(outputs, terms), d.asset, graceMs, now), d.currency, d.asset);
  return units === undefined ? undefined : fromUnits(units, d.asset);
}

/**
 * Decides, for each replaced quote whose grace has a standing payment in it and no decision yet,
 * whether the payments of that grace count at it ("taken") or at the quote that replaced it
 * ("declined"): the one that leaves the shopper closest to paid. What is left due is computed both
 * ways; if either leaves nothing due, the one with the smaller excess (a shopper who paid what the
 * replaced quote asked is neither short nor over), else the one with less left due; even, the
 * replaced quote. Decided once, by the settlement that first sees such a payment, and kept (its
 * fiat_value is fixed at that quote). Returns the intent's price with its decisions, or undefined
 * when none was due.
 */
export function decideGrace(row: IntentRow, outputs: readonly QuotedOutput[], terms: IntentTerms, graceMs: number, now: Date): IntentPrice | undefined {
  if (!row.price || row.price.history.length === 0 || graceMs <= 0) return undefined;
  const d = decimalsOf(row);
  if (!d) return undefined;
  const price = row.price;
  const quotes = quotesOf(price).map((q) => ({ ...q }));
  const live = standing(outputs, terms);
  const paid = live.reduce((sum, o) => sum + toUnits(o.amount, d.asset), 0n);
  let changed = false;
  for (let k = 1; k < quotes.length; k++) {
    const replaced = quotes[k - 1] as QuoteEntry;
    if (replaced.grace !== undefined) continue;
    const from = (quotes[k] as QuoteEntry).quotedAt.getTime();
    const inGrace = live.some((o) => {
      const at = paidAt(o, now).getTime();
      return at >= from && at < from + graceMs;
    });
    if (!inGrace) continue;
    const leftDue = (choice: "taken" | "declined"): bigint | undefined => {
      replaced.grace = choice;
      const units = requestedUnits(price, quotes, tookByQuote(quotes, live, d.asset, graceMs, now), d.currency, d.asset);
      return units === undefined ? undefined : units - paid;
    };
    const taken = leftDue("taken");
    const declined = leftDue("declined");
    if (taken === undefined || declined === undefined) return undefined;
    replaced.grace = graceChoice(taken, declined);
    changed = true;
  }
  if (!changed) return undefined;
  const current = quotes.pop() as QuoteEntry;
  return { ...price, rate: current.rate, sources: current.sources, quotedAt: current.quotedAt, expiresAt: current.expiresAt, history: quotes };
}

/** Of what the two readings of a grace leave due (negative: paid over), the one closer to paid. */
export function graceChoice(taken: bigint, declined: bigint): "taken" | "declined" {
  if (taken <= 0n && declined <= 0n) return taken >= declined ? "taken" : "declined";
  if (taken <= 0n) return "taken";
  if (declined <= 0n) return "declined";
  return taken <= declined ? "taken" : "declined";
}

/** The rate and sources of the quote a payment made at `at` counts at. */
export function quoteAt(price: IntentPrice, at: Date, graceMs: number): { rate: string; sources: string[] } {
  const quotes = quotesOf(price);
  const q = quotes[quoteIndexAt(quotes, at, graceMs)] as QuoteEntry;
  return { rate: q.rate, sources: q.sources };
}
