import { create, type JsonValue } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { PaymentIntentSchema, PaymentMethodSchema, PaymentTransactionSchema, QuoteSchema, type PaymentIntent, type PaymentMethod, type Quote } from "../../gen/payments/v1/payment_intents_pb.ts";
import { ShopperPaymentIntentSchema, type ShopperPaymentIntent } from "../../gen/payments/v1/shopper_pb.ts";
import { paymentUri } from "../addresses/payment-uri.ts";
import { encodeResponse } from "../platform/api-json.ts";
import { amountDue, isPending, payableStatuses, uncountedReason, type IntentTerms } from "./funds.ts";
import { fromUnits, toUnits } from "../vocabulary/amount.ts";
import { findAsset, type AssetInfo } from "../vocabulary/assets.ts";
import { methodPending, ofIntent, type IntentRow, type TransactionFact } from "./store.ts";
import { unwatchedNotice, type ChainWatch } from "./watched.ts";

const ts = (d: Date | null) => (d === null ? undefined : timestampFromDate(d));

/** A fiat-priced intent's current quote: it holds until its own expires_at (QUOTE_SECONDS, at most the intent's), then is replaced (requote.ts). */
function quoteOf(row: IntentRow): Quote | undefined {
  if (!row.price) return undefined;
  return create(QuoteSchema, { rate: row.price.rate, sources: row.price.sources, quotedAt: timestampFromDate(row.price.quotedAt), expiresAt: timestampFromDate(row.price.expiresAt) });
}

/**
 * What an output of the intent's asset was worth in the intent's price currency, fixed by the
 * settlement that first saw it (intents/settle.ts): at the quote within the payment window, at the
 * market's rate then for a late payment. None on other intents and for another asset.
 */
function fiatValue(row: IntentRow, t: TransactionFact): string | undefined {
  return row.price && ofIntent(row, t) ? t.fiatValue : undefined;
}

/**
 * How an intent is shown: to the API and, as the same JSON, inside its events.
 * Built once from configuration (CHECKOUT_BASE_URL), so the domain never carries it.
 */
export class IntentViews {
  readonly checkoutBaseUrl: string;
  readonly #confirmations: Readonly<Record<string, number>>;
  readonly #lateWindowMs: number;
  readonly #watch: ChainWatch | undefined;

  /**
   * `confirmations`: per network, what an output needs to count instead of the asset table's
   * (<NETWORK>_CONFIRMATIONS); `lateWindowSeconds`: how long after its expiry a payment still
   * counts (LATE_PAYMENT_WINDOW_SECONDS); `watch`: which chains a watcher follows
   * (chains/coverage.ts), unset: every chain counts as followed.
   */
  constructor(checkoutBaseUrl: string, confirmations: Readonly<Record<string, number>> = {}, o: { lateWindowSeconds?: number; watch?: ChainWatch } = {}) {
    this.checkoutBaseUrl = checkoutBaseUrl;
    this.#confirmations = confirmations;
    this.#lateWindowMs = (o.lateWindowSeconds ?? 86_400) * 1000;
    this.#watch = o.watch;
  }

  /** What an output must meet to count toward the intent: its asset, its confirmations, and paid before the intent stopped taking payments. */
  terms(row: Pick<IntentRow, "network" | "asset" | "requiredConfirmations" | "status" | "cancelledAt" | "expiresAt" | "methods">): IntentTerms {
    const closes =
      row.status === "cancelled"
        ? { at: row.cancelledAt ?? row.expiresAt, reason: "intent_cancelled" as const }
        : { at: new Date(row.expiresAt.getTime() + this.#lateWindowMs), reason: "after_late_window" as const };
    return { network: row.network, asset: row.asset, methods: row.methods ?? undefined, requiredConfirmations: this.confirmationsOf(row), closes };
  }

  /** Whether a watcher follows the network in the environment now. */
  watched(network: string, environment: "test" | "live"): boolean {
    return this.#watch?.follows(network, environment) ?? true;
  }

  /** Confirmations an output of the asset needs when no merchant policy says otherwise (and on intents from before policies). */
  defaultConfirmations(asset: AssetInfo): number {
    return this.#confirmations[asset.network] ?? asset.confirmations;
  }

  /** What an output of this intent needs to count: fixed on it when it was created. */
  confirmationsOf(row: Pick<IntentRow, "network" | "asset" | "requiredConfirmations">): number {
    if (row.requiredConfirmations !== null) return row.requiredConfirmations;
    const asset = findAsset(row.network, row.asset);
    if (!asset) throw new Error(`an intent of an unknown asset ${row.network}/${row.asset}`);
    return this.defaultConfirmations(asset);
  }

  /**
   * Funds of the intent's asset seen on the chain that do not count yet (in the mempool, or short
   * of its confirmations); undefined until a transaction is seen, like amount_received.
   */
  amountPending(row: IntentRow): string | undefined {
    const asset = findAsset(row.network, row.asset);
    const transactions = row.transactions ?? [];
    if (!asset || row.amountReceived === null || transactions.length === 0) return undefined;
    const intent = this.terms(row);
    const units = transactions.filter((t) => !t.counted && isPending(t, intent)).reduce((sum, t) => sum + toUnits(t.amount, asset.decimals), 0n);
    return fromUnits(units, asset.decimals);
  }

  /** The fewest confirmations among the funds amountPending counts; undefined when there are none. */
  pendingConfirmations(row: IntentRow): number | undefined {
    const intent = this.terms(row);
    const pending = (row.transactions ?? []).filter((t) => !t.counted && ofIntent(row, t) && isPending(t, intent));
    return pending.length === 0 ? undefined : Math.min(...pending.map((t) => t.confirmations));
  }

  /**
   * The intent's payment methods: its one (network and asset) once it has an address; or each of
   * several, at its own amount and rate, with what it still asks: its amount while none is chosen,
   * the intent's amount_due for the chosen one, nothing for the others.
   */
  paymentMethods(row: IntentRow, amountDueNow: string): PaymentMethod[] {
    const environment = row.environment === "live" ? "live" : "test";
    const pending = methodPending(row);
    const payable = payableStatuses.includes(row.status);
    const list = row.methods ?? (row.depositAddress === null ? [] : [{ ...row, depositAddress: row.depositAddress, rate: row.price?.rate ?? null, sources: row.price?.sources ?? [] }]);
    return list.map((m) => {
      const chosen = !pending && m.network === row.network && m.asset === row.asset;
      return create(PaymentMethodSchema, {
        network: m.network,
        asset: m.asset,
        requestedAmount: m.requestedAmount,
        amountDue: chosen ? amountDueNow : pending && payable ? m.requestedAmount : "0",
        depositAddress: m.depositAddress,
        paymentUri: paymentUri({ network: m.network, asset: m.asset, environment, address: m.depositAddress, amount: m.requestedAmount }),
        quote: row.price && m.rate !== null ? create(QuoteSchema, { rate: m.rate, sources: m.sources, quotedAt: timestampFromDate(row.price.quotedAt), expiresAt: timestampFromDate(row.price.expiresAt) }) : undefined,
        chosen,
        requiredConfirmations: m.requiredConfirmations ?? this.confirmationsOf(row),
      });
    });
  }

  message(row: IntentRow): PaymentIntent {
    const environment = row.environment === "live" ? "live" : "test";
    const pending = methodPending(row);
    const watched = (row.methods ?? [row]).every((m) => this.watched(m.network, environment));
    const terms = this.terms(row);
    const due = amountDue({ status: row.status, network: row.network, asset: row.asset, requestedAmount: row.requestedAmount, amountReceived: row.amountReceived ?? undefined });
    // Until a payment chooses one of several methods, the intent has no one network, asset or amount.
    const one = <T>(v: T): T | undefined => (pending ? undefined : v);
    return create(PaymentIntentSchema, {
      publicId: row.id,
      status: row.status,
      merchantReference: row.merchantReference ?? undefined,
      network: one(row.network),
      asset: one(row.asset),
      requestedAmount: one(row.requestedAmount),
      environment: row.environment,
      createdAt: timestampFromDate(row.createdAt),
      expiresAt: timestampFromDate(row.expiresAt),
      checkoutUrl: `${this.checkoutBaseUrl}/${row.id}`,
      metadata: row.metadata,
      depositAddress: row.depositAddress ?? undefined,
      paymentUri:
        row.depositAddress === null
          ? undefined
          : paymentUri({ network: row.network, asset: row.asset, environment, address: row.depositAddress, amount: row.requestedAmount }),
      amountReceived: row.amountReceived ?? undefined,
      amountRefunded: row.amountRefunded ?? undefined,
      transactions: (row.transactions ?? []).map((t) =>
        create(PaymentTransactionSchema, {
          network: t.network ?? row.network,
          txHash: t.txHash,
          outputIndex: t.outputIndex,
          amount: t.amount,
          confirmations: t.confirmations,
          blockHeight: t.blockHeight === null ? undefined : BigInt(t.blockHeight),
          counted: t.counted,
          simulated: t.simulated,
          asset: t.asset,
          reason: t.counted ? undefined : uncountedReason(t, terms),
          replaceable: t.replaceable,
          fiatValue: fiatValue(row, t),
        }),
      ),
      amountPending: this.amountPending(row),
      amountDue: one(due),
      paymentMethods: this.paymentMethods(row, due),
      paidAt: ts(row.paidAt),
      expiredAt: ts(row.expiredAt),
      cancelledAt: ts(row.cancelledAt),
      source: row.source,
      cashier: row.cashier ?? undefined,
      terminal: row.terminal ?? undefined,
      requiredConfirmations: this.confirmationsOf(row),
      underpaymentToleranceBps: row.underpaymentToleranceBps,
      sequence: row.sequence,
      redirectUrl: row.redirectUrl ?? undefined,
      cancelUrl: row.cancelUrl ?? undefined,
      priceAmount: row.price?.amount,
      priceCurrency: row.price?.currency,
      quote: pending ? undefined : quoteOf(row),
      watched,
      notice: watched ? undefined : unwatchedNotice((row.methods ?? [row]).find((m) => !this.watched(m.network, environment))?.network ?? row.network, environment),
    });
  }

  /** What a shopper may see (Site Gateway, checkout page): how to pay, and how far it got. */
  shopper(row: IntentRow): ShopperPaymentIntent {
    const full = this.message(row);
    return create(ShopperPaymentIntentSchema, {
      publicId: full.publicId,
      status: full.status,
      network: full.network,
      asset: full.asset,
      requestedAmount: full.requestedAmount,
      amountReceived: full.amountReceived,
      depositAddress: full.depositAddress,
      paymentUri: full.paymentUri,
      checkoutUrl: full.checkoutUrl,
      expiresAt: full.expiresAt,
      createdAt: full.createdAt,
      redirectUrl: full.redirectUrl,
      cancelUrl: full.cancelUrl,
      amountPending: full.amountPending,
      requiredConfirmations: full.requiredConfirmations,
      pendingConfirmations: this.pendingConfirmations(row),
      priceAmount: full.priceAmount,
      priceCurrency: full.priceCurrency,
      quote: full.quote,
      watched: full.watched,
      paymentMethods: full.paymentMethods,
      otherAssetsReceived: [...new Set((row.transactions ?? []).filter((t) => !ofIntent(row, t) && !t.orphaned).map((t) => t.asset))].sort(),
    });
  }

  /** An event's data.payment_intent: the intent as the API shows it. */
  eventData(row: IntentRow): Record<string, JsonValue> {
    return this.eventDataOf(this.message(row));
  }

  /** The same, from the intent's message when the caller has built it already. */
  eventDataOf(intent: PaymentIntent): Record<string, JsonValue> {
    return { payment_intent: encodeResponse(PaymentIntentSchema, intent) };
  }
}
