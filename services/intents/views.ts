import { create, type JsonValue } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { PaymentIntentSchema, type PaymentIntent } from "../../gen/payments/v1/payment_intents_pb.ts";
import { encodeResponse } from "../platform/api-json.ts";
import type { IntentRow } from "./store.ts";

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
    });
  }

  /** An event's data.payment_intent: the intent as the API shows it. */
  eventData(row: IntentRow): Record<string, JsonValue> {
    return { payment_intent: encodeResponse(PaymentIntentSchema, this.message(row)) };
  }
}
