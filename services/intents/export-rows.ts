import { parseRate, valueAtRate } from "../rates/rate-math.ts";
import { findAsset } from "../vocabulary/assets.ts";
import { findCurrency } from "../vocabulary/currencies.ts";
import { exceptionReason, type IntentTerms } from "./funds.ts";
import { paidAt, quoteAt } from "./quotes.ts";
import { methodPending, ofIntent, type IntentRow, type TransactionFact } from "./store.ts";

/**
 * The rows of the bookkeeping export (GET …/payment-intents/export, docs/api.md "Export Payment
 * Intents"): pure, so the columns' rules are tested without a database. One row per transaction
 * received to the intent's address; an intent with none still gets one row (the books see every
 * intent asked for), its transaction columns empty. An output whose block left the best chain, or
 * that was withdrawn from the mempool, was never received and has no row.
 */

/** The header line, in column order. */
export const exportColumns = [
  "intent_id",
  "created_at",
  "merchant_reference",
  "status",
  "network",
  "asset",
  "contract",
  "requested_amount",
  "price_amount",
  "price_currency",
  "tx_hash",
  "output_index",
  "amount",
  "confirmations",
  "block_height",
  "block_time",
  "counted",
  "quote_rate",
  "quote_sources",
  "fiat_value_at_quote",
  "fiat_value",
  "fiat_value_at_confirmation",
  "exception_reason",
  "amount_refunded",
] as const;

export type ExportRow = Record<(typeof exportColumns)[number], string>;

/** What a row needs beyond the intent: its terms (what counts, views.terms) and the quoting grace (QUOTE_GRACE_SECONDS, ms). */
export interface ExportContext {
  terms: IntentTerms;
  graceMs: number;
}

const iso = (d: Date | null | undefined) => (d ? d.toISOString() : "");

/**
 * A text a merchant or shopper chose, as a spreadsheet will not run it: one that starts like a
 * formula (=, +, -, @, tab, return) gets a leading apostrophe (OWASP's CSV injection advice).
 */
export function spreadsheetSafe(text: string): string {
  return /^[=+\-@\t\r]/.test(text) ? `'${text}` : text;
}

/** The intent's rows, its transactions oldest first. */
export function exportRows(row: IntentRow, c: ExportContext): ExportRow[] {
  const received = (row.transactions ?? []).filter((t) => !t.orphaned);
  if (received.length === 0) {
    // Several methods, none chosen: the intent has no one network, asset or amount yet (its methods are in the API).
    if (methodPending(row)) return [{ ...intentColumns(row, row.asset, undefined), network: "", asset: "", contract: "", requested_amount: "" }];
    return [intentColumns(row, row.asset, row.price ? { rate: row.price.rate, sources: row.price.sources } : undefined)];
  }
  return received.map((t) => transactionRow(row, t, c));
}

/** The columns of the intent itself, with the asset the row is about (a transaction's may be another). */
function intentColumns(row: IntentRow, asset: string, quote: { rate: string; sources: string[] } | undefined, network = row.network): ExportRow {
  const contract = findAsset(network, asset)?.contract?.[row.environment === "live" ? "live" : "test"];
  return {
    intent_id: row.id,
    created_at: iso(row.createdAt),
    merchant_reference: spreadsheetSafe(row.merchantReference ?? ""),
    status: row.status,
    network,
    asset,
    contract: contract ?? "",
    requested_amount: row.requestedAmount,
    price_amount: row.price?.amount ?? "",
    price_currency: row.price?.currency ?? "",
    tx_hash: "",
    output_index: "",
    amount: "",
    confirmations: "",
    block_height: "",
    block_time: "",
    counted: "",
    quote_rate: quote?.rate ?? "",
    quote_sources: quote?.sources.join(";") ?? "",
    fiat_value_at_quote: "",
    fiat_value: "",
    fiat_value_at_confirmation: "",
    exception_reason: "",
    amount_refunded: row.amountRefunded ?? "",
  };
}

function transactionRow(row: IntentRow, t: TransactionFact, c: ExportContext): ExportRow {
  // A payment of the intent's asset on a fiat-priced intent counts at the quote in force when it
  // was paid (quotes.ts); another asset has no rate to the price.
  const priced = row.price && ofIntent(row, t) ? row.price : undefined;
  const quote = priced ? quoteAt(priced, paidAt(t, t.recordedAt ?? row.createdAt), c.graceMs) : undefined;
  // A payment to another of its methods was on that method's chain.
  const network = t.network ?? row.network;
  const decimals = findAsset(network, t.asset)?.decimals;
  const currency = priced ? findCurrency(priced.currency) : undefined;
  const rate = quote ? parseRate(quote.rate) : undefined;
  return {
    ...intentColumns(row, t.asset, quote, network),
    // The hash alone (no ":0" output suffix): what an explorer finds; the output is its own column.
    tx_hash: t.txHash,
    output_index: String(t.outputIndex),
    amount: t.amount,
    confirmations: String(t.confirmations),
    block_height: t.blockHeight === null ? "" : String(t.blockHeight),
    // observedAt is the block's time once mined; in the mempool it is first sight, not a block time.
    block_time: t.blockHeight === null || t.mempool ? "" : iso(t.observedAt),
    counted: String(t.counted),
    fiat_value_at_quote: rate !== undefined && decimals !== undefined && currency ? valueAtRate(t.amount, decimals, rate, currency.decimals) : "",
    fiat_value: priced ? (t.fiatValue ?? "") : "",
    // At the market's rate when it first counted (settle.ts); empty while uncounted or without a fresh rate then.
    fiat_value_at_confirmation: priced ? (t.fiatValueConfirmed ?? "") : "",
    exception_reason: exceptionReason(t, c.terms) ?? "",
    // The intent's, on each of its rows as its quote is: what its completed refunds gave back in its asset.
    amount_refunded: row.amountRefunded ?? "",
  };
}
