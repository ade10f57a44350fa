// A quote's life (services/intents/quotes.ts, issue 61): what a re-quoted intent asks for, at which
// quote a payment counts, how a payment within a replaced quote's grace is read; and the
// QUOTE_SECONDS / QUOTE_GRACE_SECONDS settings (services/platform/config.ts).
import t from "tap";
import { ConfigError, loadConfig } from "../../services/platform/config.ts";
import type { IntentPrice, QuoteEntry } from "../../services/intents/pricing.ts";
import { decideGrace, graceChoice, quoteExpiry, quoteIndexAt, requestedByQuotes, requestedUnits } from "../../services/intents/quotes.ts";
import type { IntentRow } from "../../services/intents/store.ts";
import type { IntentTerms } from "../../services/intents/funds.ts";

const at = (s: number) => new Date(Date.UTC(2026, 11, 2, 10, 0, s));
const quote = (rate: string, from: number, grace?: "taken" | "declined"): QuoteEntry => ({ rate, sources: ["kraken"], quotedAt: at(from), expiresAt: at(from + 60), ...(grace ? { grace } : {}) });
const priceOf = (quotes: QuoteEntry[]): IntentPrice => {
  const current = quotes[quotes.length - 1] as QuoteEntry;
  return { amount: "100.00", currency: "USD", rate: current.rate, sources: current.sources, quotedAt: current.quotedAt, expiresAt: current.expiresAt, history: quotes.slice(0, -1) };
};
// BTC: 8 places; USD: 2.
const units = (quotes: QuoteEntry[], took: bigint[]) => requestedUnits(priceOf(quotes), quotes, took, 2, 8);

t.test("what an intent asks for, by its quotes and what each took", async (t) => {
  t.equal(units([quote("50000", 0)], []), 200_000n, "one quote: 100 USD at 50,000 is 0.002 BTC, as at creation");
  t.equal(units([quote("50000", 0)], [150_000n]), 200_000n, "whatever was paid under it");
  t.equal(units([quote("50000", 0), quote("40000", 60)], [0n, 0n]), 250_000n, "re-quoted with nothing paid: 100 USD at 40,000");
  t.equal(units([quote("50000", 0), quote("40000", 60)], [100_000n, 0n]), 225_000n, "half paid under the first: the other 50 USD at 40,000, plus what was paid");
  t.equal(units([quote("50000", 0), quote("40000", 60)], [200_000n, 0n]), 200_000n, "paid in full under the first: later quotes change nothing");
  t.equal(units([quote("50000", 0), quote("40000", 60)], [300_000n, 0n]), 200_000n, "overpaid under the first: the excess stays as paid, not converted");
  t.equal(units([quote("49995", 0), quote("50000", 60)], [0n]), 200_001n, "rounded up at each step: 0.00200021 BTC at 49,995 carried to 50,000 is 0.00200001, never down");
  t.equal(units([quote("50000", 0), quote("40000", 60), quote("50000", 120)], [0n, 125_000n, 0n]), 225_000n, "half paid under the second: its other half carried back to 50,000");
  t.equal(units([quote("x", 0)], []), undefined, "a rate that does not parse: none");
});

t.test("the quote a payment counts at: the one in force when it was paid, or within the grace the replaced one if decided so", async (t) => {
  const grace = 10_000;
  const undecided = [quote("50000", 0), quote("40000", 60)];
  t.equal(quoteIndexAt(undecided, at(-5), grace), 0, "before the first quote: the first");
  t.equal(quoteIndexAt(undecided, at(59), grace), 0, "while the first stood (lapsed or not)");
  t.equal(quoteIndexAt(undecided, at(60), grace), 1, "from its replacement, the new one");
  t.equal(quoteIndexAt(undecided, at(65), grace), 1, "within the grace, undecided: the new one");
  const taken = [quote("50000", 0, "taken"), quote("40000", 60)];
  t.equal(quoteIndexAt(taken, at(65), grace), 0, "within the grace, taken: the replaced one");
  t.equal(quoteIndexAt(taken, at(70), grace), 1, "after the grace: the new one");
  t.equal(quoteIndexAt([quote("50000", 0, "declined"), quote("40000", 60)], at(65), grace), 1, "declined: the new one");
});

t.test("the grace is read the way that leaves the shopper closest to paid", async (t) => {
  t.equal(graceChoice(0n, 50_000n), "taken", "the old amount paid: the old quote");
  t.equal(graceChoice(50_000n, 0n), "declined", "the new amount paid: the new quote");
  t.equal(graceChoice(0n, -40_000n), "taken", "both cover: the one not over");
  t.equal(graceChoice(-40_000n, 0n), "declined");
  t.equal(graceChoice(10_000n, 20_000n), "taken", "neither covers: the one with less left due");
  t.equal(graceChoice(10_000n, 10_000n), "taken", "even: the replaced quote");

  const terms: IntentTerms = { asset: "BTC", requiredConfirmations: 1 };
  const row = (quotes: QuoteEntry[]): IntentRow =>
    ({ id: "pi_x", network: "bitcoin", asset: "BTC", requestedAmount: "0", price: priceOf(quotes) }) as unknown as IntentRow;
  const paid = (amount: string, s: number) => ({ asset: "BTC", amount, orphaned: false, confirmations: 1, recordedAt: at(s), observedAt: at(s) });
  const graceMs = 10_000;
  // The market rose: the new quote asks less (0.0016 BTC).
  const rose = [quote("50000", 0), quote("62500", 60)];
  t.equal(decideGrace(row(rose), [paid("0.002", 62)], terms, graceMs, at(62))?.history[0]?.grace, "taken", "the old amount, just after: at the old quote (confirmed, not overpaid)");
  t.equal(decideGrace(row(rose), [paid("0.0016", 62)], terms, graceMs, at(62))?.history[0]?.grace, "declined", "the new amount: at the new quote");
  t.equal(decideGrace(row(rose), [paid("0.002", 75)], terms, graceMs, at(75)), undefined, "after the grace: nothing to decide");
  const decided = decideGrace(row(rose), [paid("0.002", 62)], terms, graceMs, at(62));
  t.equal(decided?.rate, "62500", "the current quote stays current");
  t.equal(requestedByQuotes(row(decided ? [...decided.history, quote("62500", 60)] : rose), [paid("0.002", 62)], terms, graceMs, at(62)), "0.002", "and asks for what the old quote did");
  t.equal(decideGrace(row([quote("50000", 0, "declined"), quote("62500", 60)]), [paid("0.002", 62)], terms, graceMs, at(62)), undefined, "decided once");
  t.equal(requestedByQuotes(row([quote("50000", 0)]), [], terms, graceMs, at(0)), undefined, "never re-quoted: the amount of its creation");
});

t.test("a quote holds QUOTE_SECONDS, never past its intent's expiry", async (t) => {
  t.same(quoteExpiry(at(0), at(3600), 900), at(900));
  t.same(quoteExpiry(at(0), at(600), 900), at(600));
});

function refused(env: Record<string, string>): string {
  try {
    loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) return err.message;
    throw err;
  }
  return "";
}

t.test("QUOTE_SECONDS and QUOTE_GRACE_SECONDS: checked at start, naming themselves", async (t) => {
  t.same(loadConfig({}).quotes, { seconds: 900, graceSeconds: 120 }, "15 minutes, and 2 of grace");
  t.same(loadConfig({ QUOTE_SECONDS: "2" }).quotes, { seconds: 2, graceSeconds: 2 }, "a short quote: its grace at most as long");
  t.same(loadConfig({ QUOTE_SECONDS: "86400", QUOTE_GRACE_SECONDS: "0" }).quotes, { seconds: 86_400, graceSeconds: 0 });
  t.equal(
    refused({ QUOTE_SECONDS: "86401" }),
    "QUOTE_SECONDS must be at most 86400, the longest expiry an intent can have (expires_in_seconds): a quote never outlives its intent, got 86401",
  );
  t.match(refused({ QUOTE_SECONDS: "0" }), /QUOTE_SECONDS must be between 1 and/);
  t.match(refused({ QUOTE_SECONDS: "15m" }), /QUOTE_SECONDS must be a whole number/);
  t.equal(refused({ QUOTE_SECONDS: "60", QUOTE_GRACE_SECONDS: "61" }), "QUOTE_GRACE_SECONDS must be at most QUOTE_SECONDS (60): a lapsed quote is honoured for less than a quote's life, got 61");
});
