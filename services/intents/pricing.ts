import { apiError } from "../platform/errors.ts";
import { amountForPrice, applySpread, formatRate } from "../rates/rate-math.ts";
import { sourcesDownText, type RateEngine } from "../rates/engine.ts";
import type { AssetInfo } from "../vocabulary/assets.ts";
import { findCurrency } from "../vocabulary/currencies.ts";
import type { CreateInput } from "./validate.ts";

/** A quote of a fiat-priced intent: its rate, where it came from, and how long it held. */
export interface QuoteEntry {
  /** Units of the currency per unit of the asset, after the merchant's spread: a decimal string. */
  rate: string;
  sources: string[];
  quotedAt: Date;
  /** When it lapses (or lapsed): QUOTE_SECONDS after quotedAt, at most the intent's expiry. */
  expiresAt: Date;
  /**
   * On a replaced quote: whether payments made within QUOTE_GRACE_SECONDS after it was replaced
   * count at it ("taken") or at the quote that replaced it ("declined"); unset until one is seen
   * (quotes.ts decideGrace).
   */
  grace?: "taken" | "declined" | undefined;
}

/** What a fiat-priced intent keeps of its price and its quotes: the current one, and those it replaced. */
export interface IntentPrice {
  amount: string;
  currency: string;
  /** The current quote's rate: units of the currency per unit of the asset, after the merchant's spread (a decimal string). */
  rate: string;
  sources: string[];
  quotedAt: Date;
  /** When the current quote lapses; on intents from before quotes had their own life, the intent's expires_at. */
  expiresAt: Date;
  /** The quotes it replaced, oldest first (empty: never re-quoted). */
  history: QuoteEntry[];
}

/** The quote of a create: the price and the rate it is asked at (its expiry follows from the intent's). */
export type CreateQuote = Omit<IntentPrice, "expiresAt" | "history">;

/** A create request with its amount decided: given, or computed from a quote. */
export type PricedInput = CreateInput & { requestedAmount: string; priced: CreateQuote | undefined };

/**
 * Decides the asset amount of a create: the one given, or the price at the engine's quote (less
 * the merchant's spread), rounded up in the asset's smallest unit. With no quote it refuses with
 * 503 rate_unavailable and Retry-After (the next refresh), before anything is written.
 */
export function priceInput(input: CreateInput, asset: AssetInfo, rates: RateEngine | undefined, environment: string, spreadBps: number, now: Date): PricedInput {
  if (input.requestedAmount !== undefined) return { ...input, requestedAmount: input.requestedAmount, priced: undefined };
  const price = input.price;
  const currency = price && findCurrency(price.currency);
  // The field rules let exactly one of the two through; reaching here without either is a bug.
  if (!price || !currency) throw apiError("internal_error", "A create request reached its handler unchecked.");
  const env = environment === "live" ? "live" : "test";
  const quote = rates?.quote(asset.asset, currency.code, env, now.getTime());
  if (!quote) throw rateUnavailable(asset, currency.code, rates, env, now);
  const rate = applySpread(quote.rate, spreadBps);
  return {
    ...input,
    requestedAmount: amountForPrice(price.amount, currency.decimals, rate, asset.decimals),
    priced: { amount: price.amount, currency: currency.code, rate: formatRate(rate), sources: quote.sources, quotedAt: now },
  };
}

/**
 * 503 rate_unavailable, saying what is wrong: sources that answer and agree too few, or none
 * answering at all (each named, with why), or none that can even be reached, where waiting alone
 * does not help: then, in Test, it names RATE_SOURCES=fixed (development rates, no internet
 * needed). A message that said only "retry later" sent a developer offline waiting. Retry-After
 * stays (every 503 has one, docs/api.md): the next refresh, when a network back is noticed.
 */
export function rateUnavailable(asset: AssetInfo, currency: string, rates: RateEngine | undefined, environment: "test" | "live", now: Date) {
  const state = rates?.sourcesDown(environment);
  const nothing = `No ${asset.asset} rate in ${currency} now`;
  let message = `${nothing}: too few exchange rate sources answered recently and agreed. Nothing was created; retry later.`;
  if (state && state.answering < state.minSources && state.down.length > 0) {
    const down = sourcesDownText(state.down);
    message = state.offline
      ? `${nothing}: no exchange rate source can be reached from the server (${down}). Nothing was created. ` +
        (environment === "test" ? "For development without internet, start the server with RATE_SOURCES=fixed (Test only)." : "The server's operator must let it reach the exchanges.")
      : `${nothing}: ${state.answering} exchange rate source${state.answering === 1 ? "" : "s"} answer${state.answering === 1 ? "s" : ""} and ${state.minSources} must agree; not answering: ${down}. Nothing was created; retry later.`;
  }
  const err = apiError("rate_unavailable", message, "price_currency");
  err.metadata.set("retry-after", String(rates?.retryAfterSeconds(now.getTime()) ?? 60));
  return err;
}
