import type { JsonValue } from "@bufbuild/protobuf";
import { recordEvents, type NewEvent } from "../events/record.ts";
import type { EntityManager } from "../platform/db.ts";
import { lockedNow } from "../platform/db-clock.ts";
import { formatRate, parseRate, valueAtRate } from "../rates/rate-math.ts";
import type { RateEngine } from "../rates/engine.ts";
import { assets, findAsset } from "../vocabulary/assets.ts";
import { currencyCodes, findCurrency } from "../vocabulary/currencies.ts";
import type { Intents } from "./intents.ts";
import type { IntentOutput, IntentOutputs } from "./settle.ts";
import { claimFiatValueDue, clearFiatValueDue, ofIntent, type IntentRow, type QuotablePair, type TransactionFact } from "./store.ts";
import { paidAt, quoteAt } from "./quotes.ts";

/**
 * What a fiat-priced intent's payments were worth in its price currency (transactions[].fiat_value):
 * the one rule (valuationRate), used by the settlement that first sees an output (settle.ts) and by
 * the sweep here, which values what that settlement could not because no rate was fresh then.
 * The values are written through IntentOutputs.setFiatValues (chains/output-store.ts owns the
 * table), the mark of an intent that waits through store.ts (payment_intents' one writer).
 */

/** A rate an output is valued at, and where it came from. */
export interface ValuationRate {
  rate: bigint;
  sources: string[];
  /** quote: the quote it counts at (seen within its payment window); market: the market's rate (seen after it, late). */
  basis: "quote" | "market";
}

/**
 * The rate an output of the intent's asset first seen at `seenAt` is valued at: within the
 * payment window, the quote it counts at (what the shopper was asked to pay at, always there: the
 * one in force when it was paid, `paid`, or the one that quote replaced when paid within the
 * grace and the intent's decision says so, quotes.ts); after it, the market's rate as a quote
 * reads it (the median of fresh agreeing sources, without the merchant's spread), as fresh at
 * `now` (ms, the process's clock the rates are kept on). Undefined while too few sources are
 * fresh: the engine keeps no history, so a late payment seen during a rate outage is valued at the
 * first fresh rate after it (the sweep), the nearest to its moment there is.
 */
export function valuationRate(intents: Intents, row: IntentRow, seenAt: Date, now: number, paid: Date = seenAt): ValuationRate | undefined {
  if (!row.price) return undefined;
  if (seenAt.getTime() <= row.expiresAt.getTime()) {
    const quote = quoteAt(row.price, paid, intents.quoting.graceSeconds * 1000);
    const rate = parseRate(quote.rate);
    return rate === undefined ? undefined : { rate, sources: quote.sources, basis: "quote" };
  }
  const q = intents.rates?.quote(row.asset, row.price.currency, row.environment === "live" ? "live" : "test", now);
  return q && { rate: q.rate, sources: q.sources, basis: "market" };
}

/** An intent's outputs that take a fiat value and have none yet: of its asset, on the chain (not orphaned), of a fiat-priced intent. */
export function unvalued<T extends TransactionFact>(row: IntentRow, outputs: readonly T[]): T[] {
  return row.price ? outputs.filter((o) => ofIntent(row, o) && o.fiatValue === undefined && !o.orphaned) : [];
}

/** One pass of the sweep: intents claimed, and outputs valued. */
export interface ValuationPass {
  claimed: number;
  valued: number;
}

/**
 * The valuation sweep, one batch in one transaction: the intents marked as waiting for a fiat value
 * (settle.ts marks them) whose pair has a rate now are locked (skipping those another process
 * holds), their outputs read again under the lock, and each output still without a value is valued
 * by valuationRate, written where none was written yet, and told in the intent's timeline as one
 * `payment.valued` event per intent. The mark is cleared once nothing of the intent waits.
 *
 * Any number of processes may run it at once: an intent is held by one of them at a time, and the
 * next to hold it reads what the first wrote (read committed: each statement sees what committed
 * before it), so an output is valued, and told, once.
 */
export async function valueDue(em: EntityManager, intents: Intents, outputs: IntentOutputs, batch = 100): Promise<ValuationPass> {
  const rates = intents.rates;
  if (!rates) return { claimed: 0, valued: 0 };
  return em.transactional(async (tx) => {
    const rows = await claimFiatValueDue(tx, quotablePairs(rates, Date.now()), batch);
    if (rows.length === 0) return { claimed: 0, valued: 0 };
    // The events' time, on the database's clock once the intents are held (as a settlement's).
    const at = await lockedNow(tx);
    const outputsOf = await outputs.of(tx, rows.map((r) => r.id));
    const values: { id: number; value: string }[] = [];
    const events: NewEvent[] = [];
    const done: string[] = [];
    for (const row of rows) {
      const list = outputsOf.get(row.id) ?? [];
      const asset = findAsset(row.network, row.asset);
      const currency = findCurrency(row.price?.currency ?? "");
      const valued: { output: IntentOutput; rate: ValuationRate }[] = [];
      let waiting = false;
      // An intent of an asset or currency no longer known has nothing this code can value: not waited on.
      if (asset && currency) {
        for (const output of unvalued(row, list)) {
          // As the settlement that saw it would have: by when it was first recorded.
          const rate = valuationRate(intents, row, output.recordedAt ?? at, Date.now(), paidAt(output, at));
          if (!rate) {
            waiting = true;
            continue;
          }
          output.fiatValue = valueAtRate(output.amount, asset.decimals, rate.rate, currency.decimals);
          values.push({ id: output.id, value: output.fiatValue });
          valued.push({ output, rate });
        }
      }
      if (!waiting) done.push(row.id);
      if (valued.length > 0 && currency) events.push(valuedEvent(intents, row, list, valued, currency.code, at));
    }
    await outputs.setFiatValues(tx, values);
    await clearFiatValueDue(tx, done);
    await recordEvents(tx, events);
    return { claimed: rows.length, valued: values.length };
  });
}

/**
 * payment.valued: outputs of the intent valued after the settlement that saw them (no rate was
 * fresh then). Its status does not change; data.payment_intent shows the values, and
 * data.valuation what each was valued at and when. Delivered to endpoints that take the type
 * (vocabulary/event-types.ts receives); the intent's timeline shows it whatever they name.
 */
function valuedEvent(intents: Intents, row: IntentRow, list: readonly IntentOutput[], valued: readonly { output: IntentOutput; rate: ValuationRate }[], currency: string, at: Date): NewEvent {
  const transactions = list.map(({ id: _, countedLate: __, ...fact }) => fact);
  const valuation: Record<string, JsonValue> = {
    currency,
    valued_at: at.toISOString(),
    transactions: valued.map(({ output, rate }) => ({
      tx_hash: output.txHash,
      output_index: output.outputIndex,
      asset: output.asset,
      amount: output.amount,
      fiat_value: output.fiatValue ?? null,
      rate: formatRate(rate.rate),
      rate_basis: rate.basis,
      rate_sources: rate.sources,
      seen_at: output.recordedAt?.toISOString() ?? null,
    })),
  };
  return {
    merchantId: row.merchantId,
    environment: row.environment === "live" ? "live" : "test",
    type: "payment.valued",
    data: { ...intents.views.eventData({ ...row, transactions }), valuation },
    paymentIntentId: row.id,
    createdAt: at,
  };
}

/** Every (asset, currency, environment) the engine quotes now: the sweep claims only intents it can value. */
export function quotablePairs(rates: RateEngine, now: number): QuotablePair[] {
  const pairs: QuotablePair[] = [];
  for (const environment of ["test", "live"] as const) {
    for (const asset of new Set(assets.map((a) => a.asset))) {
      for (const currency of currencyCodes) if (rates.quote(asset, currency, environment, now)) pairs.push({ asset, currency, environment });
    }
  }
  return pairs;
}
