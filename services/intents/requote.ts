import type { JsonValue } from "@bufbuild/protobuf";
import type { Owner } from "../auth/keys.ts";
import { recordEvents, type NewEvent } from "../events/record.ts";
import type { EntityManager } from "../platform/db.ts";
import { lockedNow } from "../platform/db-clock.ts";
import { policySnapshot } from "../policy/policy.ts";
import { applySpread, formatRate } from "../rates/rate-math.ts";
import { amountDue } from "./funds.ts";
import type { Intents } from "./intents.ts";
import type { IntentPrice } from "./pricing.ts";
import { quoteExpiry, requestedByQuotes } from "./quotes.ts";
import { settleMany, type IntentOutputs } from "./settle.ts";
import { claimLapsedQuotes, saveQuotes, type IntentRow } from "./store.ts";
import { quotablePairs } from "./valuation.ts";

/**
 * A quote has its own life: a fiat-priced intent's quote holds for QUOTE_SECONDS (at most until
 * the intent expires); once it lapses, this sweep prices what is still due again at the rate of
 * the moment, so a shopper never holds a free option on a volatile asset for the intent's whole
 * life. The rule for what the intent then asks, and at which quote each payment counts, is
 * quotes.ts's.
 */

/** One pass of the sweep: intents claimed, and re-quoted. */
export interface RequotePass {
  claimed: number;
  requoted: number;
}

/**
 * The requote sweep, one batch in one transaction: payable intents whose quote lapsed before they
 * expire, of a pair the engine quotes now, are locked (skipping those another process holds), and
 * each gets a new quote: the engine's rate less the merchant's spread as its policy says now,
 * quoted at the database's clock once they are held, holding QUOTE_SECONDS (at most until the
 * intent expires). Its requested amount follows (what earlier quotes took, plus what is still due
 * at the new rate: quotes.ts), told in its timeline as `payment.requoted`, and then it is settled
 * again, so a status the new amount implies (a remainder now within the tolerance) is reached and
 * told after it.
 *
 * With no fresh rate for its pair an intent is not claimed: its quote stands, lapsed, until a rate
 * is fresh (payments meanwhile count at it, as the quote in force). Any number of processes may
 * run it at once: an intent is held by one of them at a time, and the next reads what the first
 * wrote (its quote no longer lapsed), so a lapse is re-quoted once.
 */
export async function requoteDue(em: EntityManager, intents: Intents, outputs: IntentOutputs, batch = 100): Promise<RequotePass> {
  const rates = intents.rates;
  if (!rates) return { claimed: 0, requoted: 0 };
  return em.transactional(async (tx) => {
    const rows = await claimLapsedQuotes(tx, quotablePairs(rates, Date.now()), batch);
    if (rows.length === 0) return { claimed: 0, requoted: 0 };
    // The new quotes' time, on the database's clock once the intents are held (as a settlement's):
    // payments are recorded on it too, so which quote was in force when one was paid is one clock's word.
    const at = await lockedNow(tx);
    const outputsOf = await outputs.of(tx, rows.map((r) => r.id));
    const spreads = new Map<string, number>();
    const saved: { id: string; price: IntentPrice; requestedAmount: string }[] = [];
    const events: NewEvent[] = [];
    const requoted: IntentRow[] = [];
    for (const row of rows) {
      if (!row.price || at.getTime() >= row.expiresAt.getTime()) continue;
      const environment = row.environment === "live" ? "live" : "test";
      const quote = rates.quote(row.asset, row.price.currency, environment, Date.now());
      if (!quote) continue;
      const owner: Owner = { merchantId: row.merchantId, environment };
      const key = `${owner.merchantId}:${owner.environment}`;
      let spread = spreads.get(key);
      if (spread === undefined) {
        spread = (await policySnapshot(tx, owner)).priceSpreadBps;
        spreads.set(key, spread);
      }
      const { history, ...current } = row.price;
      const price: IntentPrice = {
        ...row.price,
        rate: formatRate(applySpread(quote.rate, spread)),
        sources: quote.sources,
        quotedAt: at,
        expiresAt: quoteExpiry(at, row.expiresAt, intents.quoting.seconds),
        history: [...history, { rate: current.rate, sources: current.sources, quotedAt: current.quotedAt, expiresAt: current.expiresAt }],
      };
      const list = outputsOf.get(row.id) ?? [];
      const transactions = list.map(({ id: _, countedLate: __, ...fact }) => fact);
      const next: IntentRow = { ...row, price, transactions };
      next.requestedAmount = requestedByQuotes(next, list, intents.views.terms(next), intents.quoting.graceSeconds * 1000, at) ?? row.requestedAmount;
      saved.push({ id: row.id, price, requestedAmount: next.requestedAmount });
      events.push(requotedEvent(intents, { ...row, transactions }, next, at));
      requoted.push(next);
    }
    await saveQuotes(tx, saved, at);
    await recordEvents(tx, events);
    // A millisecond on: a move the new amount implies is told after the re-quote.
    await settleMany(tx, intents, outputs, requoted, new Date(at.getTime() + 1));
    return { claimed: rows.length, requoted: requoted.length };
  });
}

/**
 * payment.requoted: the intent's quote lapsed and what was still due was priced again at the rate
 * of the moment. Its status does not change (a move the new amount implies follows as its own
 * event); data.payment_intent shows the new quote, requested_amount, amount_due and payment_uri,
 * and data.requote the quote it replaced, what was asked under it, and until when a payment
 * still counts at it (grace_ends_at). Delivered to endpoints that take the type
 * (vocabulary/event-types.ts receives); the intent's timeline shows it whatever they name.
 */
function requotedEvent(intents: Intents, before: IntentRow, after: IntentRow, at: Date): NewEvent {
  const previous = before.price as IntentPrice;
  const requote: Record<string, JsonValue> = {
    previous_quote: {
      rate: previous.rate,
      sources: previous.sources,
      quoted_at: previous.quotedAt.toISOString(),
      expires_at: previous.expiresAt.toISOString(),
    },
    previous_requested_amount: before.requestedAmount,
    previous_amount_due: amountDue({ ...before, amountReceived: before.amountReceived ?? undefined }),
    grace_ends_at: new Date(at.getTime() + intents.quoting.graceSeconds * 1000).toISOString(),
  };
  return {
    merchantId: after.merchantId,
    environment: after.environment === "live" ? "live" : "test",
    type: "payment.requoted",
    data: { ...intents.views.eventData(after), requote },
    paymentIntentId: after.id,
    createdAt: at,
  };
}
