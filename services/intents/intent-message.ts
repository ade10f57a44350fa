import { create, type JsonValue } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { PaymentIntentSchema, type PaymentIntent } from "../../gen/payments/v1/payment_intents_pb.ts";
import { encodeResponse } from "../platform/api-json.ts";

/** The columns of a payment intent as handlers use them. */
export interface IntentRow {
  id: string;
  merchantId: string;
  environment: string;
  status: string;
  merchantReference: string | null;
  network: string;
  asset: string;
  requestedAmount: string;
  metadata: Record<string, string>;
  createdAt: Date;
  expiresAt: Date;
}

export function toMessage(row: IntentRow, checkoutBaseUrl: string): PaymentIntent {
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
    checkoutUrl: `${checkoutBaseUrl}/${row.id}`,
    metadata: row.metadata,
  });
}

/** The intent as the API shows it, for an event's data.payment_intent. */
export function toEventData(message: PaymentIntent): Record<string, JsonValue> {
  return { payment_intent: encodeResponse(PaymentIntentSchema, message) };
}
