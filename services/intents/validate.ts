import type { CreatePaymentIntentRequest } from "../../gen/payments/v1/payment_intents_pb.ts";
import { validationError } from "../platform/errors.ts";
import { checkRequestedAmount, exampleAmount } from "../vocabulary/amount.ts";
import { assetsOn, findAsset, networks } from "../vocabulary/assets.ts";

export const limits = {
  merchantReference: 128,
  expiresInSeconds: { min: 60, max: 86_400, default: 900 },
  metadataPairs: 20,
  metadataKey: 40,
  metadataValue: 500,
  pageSize: { min: 1, max: 200, default: 50 },
} as const;

export interface CreateInput {
  network: string;
  asset: string;
  requestedAmount: string;
  merchantReference: string | null;
  expiresInSeconds: number;
  metadata: Record<string, string>;
}

/** Checks a create request field by field; the first fault is reported with its param. */
export function validateCreate(req: CreatePaymentIntentRequest): CreateInput {
  if (req.network === "") throw validationError("network", '"network" is missing or empty.');
  if (!networks.includes(req.network)) {
    throw validationError("network", `Unsupported network "${req.network}"; supported: ${networks.join(", ")}.`);
  }
  if (req.asset === "") throw validationError("asset", '"asset" is missing or empty.');
  const asset = findAsset(req.network, req.asset);
  if (!asset) {
    throw validationError("asset", `Asset "${req.asset}" is not supported on ${req.network}; supported: ${assetsOn(req.network).join(", ")}.`);
  }
  if (req.requestedAmount === "") throw validationError("requested_amount", '"requested_amount" is missing or empty: send a decimal string such as "12.50".');
  const amount = checkRequestedAmount(req.requestedAmount, asset.decimals);
  if (!amount.ok) {
    // The reason alone says what is wrong; a newcomer also needs to see what right looks like.
    const example = amount.problem === "decimals" ? `: send a decimal string such as "${exampleAmount(asset.decimals)}"` : "";
    throw validationError("requested_amount", `"requested_amount" ${amount.reason}${example}.`);
  }
  const reference = req.merchantReference;
  if (reference !== undefined && (reference.length === 0 || [...reference].length > limits.merchantReference)) {
    throw validationError("merchant_reference", `"merchant_reference" must be 1 to ${limits.merchantReference} characters.`);
  }
  const { min, max } = limits.expiresInSeconds;
  const expires = req.expiresInSeconds ?? limits.expiresInSeconds.default;
  if (expires < min || expires > max) {
    throw validationError("expires_in_seconds", `"expires_in_seconds" must be between ${min} and ${max}.`);
  }
  const pairs = Object.entries(req.metadata);
  if (pairs.length > limits.metadataPairs) {
    throw validationError("metadata", `"metadata" may hold at most ${limits.metadataPairs} pairs.`);
  }
  for (const [k, v] of pairs) {
    if (k.length === 0 || k.length > limits.metadataKey) {
      throw validationError("metadata", `metadata keys must be 1 to ${limits.metadataKey} characters.`);
    }
    if (v.length > limits.metadataValue) {
      throw validationError("metadata", `metadata values must be at most ${limits.metadataValue} characters.`);
    }
  }
  return {
    network: req.network,
    asset: req.asset,
    requestedAmount: amount.value,
    merchantReference: reference ?? null,
    expiresInSeconds: expires,
    metadata: req.metadata,
  };
}

export function validatePageSize(limit: number | undefined): number {
  const { min, max } = limits.pageSize;
  if (limit === undefined) return limits.pageSize.default;
  if (limit < min || limit > max) throw validationError("limit", `"limit" must be between ${min} and ${max}.`);
  return limit;
}
