import type { CreatePaymentIntentRequest } from "../../gen/payments/v1/payment_intents_pb.ts";
import { apiError } from "../platform/errors.ts";
import { findAsset } from "../vocabulary/assets.ts";

/**
 * What the request's (payments.v1.field) rules do not say: the defaults. The rules themselves
 * (lengths, ranges, the network's assets, the amount's form) are checked for every RPC before its
 * handler runs (services/rpc/field-rules.ts), from the proto, as gen/openapi.json states them.
 */
export const defaults = {
  expiresInSeconds: 900,
  pageSize: 50,
} as const;

export interface CreateInput {
  network: string;
  asset: string;
  /** Undefined when the intent is priced in a currency (`price`): the quote computes it. */
  requestedAmount: string | undefined;
  /** A price in a currency instead of requestedAmount (the field rules let exactly one through). */
  price: { amount: string; currency: string } | undefined;
  merchantReference: string | null;
  expiresInSeconds: number;
  metadata: Record<string, string>;
  /** The merchant's tolerance when absent. */
  underpaymentToleranceBps: number | undefined;
  redirectUrl: string | null;
  cancelUrl: string | null;
}

/** A create request that passed its field rules, with its defaults filled in. */
export function validateCreate(req: CreatePaymentIntentRequest): CreateInput {
  // The rules checked the pair; a handler reached without them is a bug, not a bad request.
  if (!findAsset(req.network, req.asset)) throw apiError("internal_error", "A create request reached its handler unchecked.");
  return {
    network: req.network,
    asset: req.asset,
    requestedAmount: req.requestedAmount,
    price: req.priceAmount !== undefined && req.priceCurrency !== undefined ? { amount: req.priceAmount, currency: req.priceCurrency } : undefined,
    merchantReference: req.merchantReference ?? null,
    expiresInSeconds: req.expiresInSeconds ?? defaults.expiresInSeconds,
    metadata: req.metadata,
    underpaymentToleranceBps: req.underpaymentToleranceBps,
    redirectUrl: req.redirectUrl ?? null,
    cancelUrl: req.cancelUrl ?? null,
  };
}

/** The page size of a list request, its range checked by the field rules. */
export function pageSizeOf(limit: number | undefined): number {
  return limit ?? defaults.pageSize;
}
