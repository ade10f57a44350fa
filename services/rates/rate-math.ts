import { fromUnits, toUnits } from "../vocabulary/amount.ts";

/**
 * Exact arithmetic of quotes: a rate is a bigint scaled by 10^rateDecimals (never a float), an
 * amount a bigint of its asset's or currency's smallest unit. Pure functions, no I/O.
 */
export const rateDecimals = 18;
const scale = 10n ** BigInt(rateDecimals);

/** An exchange's price as it wrote it ("50000.0", "1.0834"), scaled; undefined when not a plain positive decimal. */
export function parseRate(raw: unknown): bigint | undefined {
  if (typeof raw !== "string" || raw.length > 60 || !/^[0-9]+(\.[0-9]+)?$/.test(raw)) return undefined;
  const rate = toUnits(raw.replace(/^0+(?=[0-9])/, ""), rateDecimals);
  return rate > 0n ? rate : undefined;
}

export const formatRate = (rate: bigint): string => fromUnits(rate, rateDecimals);

/** 1 / rate, rounded down (a pair read the other way round: USD per EUR to EUR per USD). */
export const invertRate = (rate: bigint): bigint => (scale * scale) / rate;

/** The middle value; of an even count, the mean of the two middle values (rounded down). */
export function median(values: readonly bigint[]): bigint {
  if (values.length === 0) throw new RangeError("the median of nothing");
  const sorted = [...values].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] as bigint) : ((sorted[mid - 1] as bigint) + (sorted[mid] as bigint)) / 2n;
}

/** One source's latest good answer for a pair. */
export interface Answer {
  source: string;
  rate: bigint;
  /** When it was read (ms since the epoch). */
  at: number;
}

export interface QuoteRule {
  /** An answer older than this is stale and left out. */
  maxAgeMs: number;
  /** An answer further than this from the median of the fresh ones (in basis points of it) is an outlier and left out. */
  maxSpreadBps: number;
  /** Fewer agreeing fresh answers than this: no quote. */
  minSources: number;
}

export type QuoteResult =
  | { ok: true; rate: bigint; sources: string[]; outliers: string[] }
  | { ok: false; reason: string; outliers: string[] };

/**
 * The quote of a pair from its sources' latest answers: the median of the fresh ones after
 * dropping those that stray from it by more than maxSpreadBps. A single bad source (a stale
 * feed, a broken parser, a flash crash on one venue) moves the median little and is dropped;
 * when too few sources are left to agree, there is no quote rather than a guess.
 */
export function quoteFrom(answers: readonly Answer[], now: number, rule: QuoteRule): QuoteResult {
  const fresh = answers.filter((a) => now - a.at <= rule.maxAgeMs);
  if (fresh.length < rule.minSources) {
    return { ok: false, reason: `${fresh.length} of ${answers.length} source answers are fresh; ${rule.minSources} needed`, outliers: [] };
  }
  const middle = median(fresh.map((a) => a.rate));
  const strays = (a: Answer) => (a.rate > middle ? a.rate - middle : middle - a.rate) * 10_000n > middle * BigInt(rule.maxSpreadBps);
  const kept = fresh.filter((a) => !strays(a));
  const outliers = fresh.filter(strays).map((a) => a.source);
  if (kept.length < rule.minSources || kept.length === 0) {
    return { ok: false, reason: `${kept.length} fresh source answers agree; ${rule.minSources} needed`, outliers };
  }
  return { ok: true, rate: median(kept.map((a) => a.rate)), sources: kept.map((a) => a.source).sort(), outliers };
}

/** The rate less the merchant's spread (basis points), rounded down: a spread makes the shopper pay more, never less. */
export function applySpread(rate: bigint, spreadBps: number): bigint {
  return (rate * BigInt(10_000 - spreadBps)) / 10_000n;
}

/**
 * The asset amount for a price: price / rate, rounded UP to the asset's smallest unit, so that
 * rounding never makes a shopper underpay. `price` is a decimal string of the currency.
 */
export function amountForPrice(price: string, priceDecimals: number, rate: bigint, assetDecimals: number): string {
  const priceUnits = toUnits(price, priceDecimals);
  // units = price * 10^assetDecimals / rate, with rate = rateScaled / 10^rateDecimals and price = priceUnits / 10^priceDecimals.
  const numerator = priceUnits * 10n ** BigInt(assetDecimals) * scale;
  const denominator = rate * 10n ** BigInt(priceDecimals);
  const units = (numerator + denominator - 1n) / denominator;
  return fromUnits(units, assetDecimals);
}

/** What an asset amount is worth at a rate, in the currency, rounded down to its places (a book value never overstates). */
export function valueAtRate(amount: string, assetDecimals: number, rate: bigint, currencyDecimals: number): string {
  const units = toUnits(amount, assetDecimals);
  const value = (units * rate * 10n ** BigInt(currencyDecimals)) / (10n ** BigInt(assetDecimals) * scale);
  return fromUnits(value, currencyDecimals);
}
