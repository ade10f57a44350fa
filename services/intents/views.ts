import { create, type JsonValue } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { PaymentIntentSchema, PaymentTransactionSchema, type PaymentIntent } from "../../gen/payments/v1/payment_intents_pb.ts";
import { ShopperPaymentIntentSchema, type ShopperPaymentIntent } from "../../gen/payments/v1/shopper_pb.ts";
import { paymentUri } from "../addresses/payment-uri.ts";
import { encodeResponse } from "../platform/api-json.ts";
import type { IntentRow } from "./store.ts";

const ts = (d: Date | null) => (d === null ? undefined : timestampFromDate(d));

/**
 * How an intent is shown: to the API and, as the same JSON, inside its events.
 * Built once from configuration (CHECKOUT_BASE_URL), so the domain never carries it.
 */
export class IntentViews {
  readonly checkoutBaseUrl: string;

  constructor(checkoutBaseUrl: string) {
    this.checkoutBaseUrl = checkoutBaseUrl;
  }

  message(row: IntentRow): PaymentIntent {
    const environment = row.environment === "live" ? "live" : "test";
    return create(PaymentIntentSchema, {
      publicId: row.id,
      status: row.status,
      merchantReference: row.merchantReference ?? undefined,
      network: row.network,
      asset: row.asset,
      requestedAmount: row.requestedAmount,
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
      transactions: (row.transactions ?? []).map((t) =>
        create(PaymentTransactionSchema, {
          txHash: t.txHash,
          outputIndex: t.outputIndex,
          amount: t.amount,
          confirmations: t.confirmations,
          blockHeight: t.blockHeight === null ? undefined : BigInt(t.blockHeight),
          counted: t.counted,
          simulated: t.simulated,
        }),
      ),
      paidAt: ts(row.paidAt),
      expiredAt: ts(row.expiredAt),
      cancelledAt: ts(row.cancelledAt),
      source: row.source,
      cashier: row.cashier ?? undefined,
      terminal: row.terminal ?? undefined,
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
