import type { CreatePaymentIntentRequest } from "../../gen/payments/v1/payment_intents_pb.ts";
import { apiError } from "../platform/errors.ts";
import type { Value } from "@bufbuild/protobuf/wkt";
import { validationError } from "../platform/errors.ts";
import { checkRequestedAmount } from "../vocabulary/amount.ts";
import { assets, findAsset } from "../vocabulary/assets.ts";

/**
 * What the request's (payments.v1.field) rules do not say: the defaults. The rules themselves
 * (lengths, ranges, the network's assets, the amount's form) are checked for every RPC before its
 * handler runs (services/rpc/field-rules.ts), from the proto, as gen/openapi.json states them.
 */
export const defaults = {
  expiresInSeconds: 900,
  pageSize: 50,
} as const;

/** A payment method a create asks for. */
export interface MethodAsk {
  network: string;
  asset: string;
}

/** The most methods one intent may offer: every network and asset we accept, with room to spare. */
export const maxMethods = 12;

export interface CreateInput {
  /** The one method's network and asset; with `methods`, the first method's (once "all" is resolved: Intents). */
  network: string;
  asset: string;
  /** Several methods (payment_methods), in the order asked, or "all" (every one the server watches); undefined: network and asset. */
  methods: MethodAsk[] | "all" | undefined;
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
  const methods = req.paymentMethods === undefined ? undefined : methodsAsked(req.paymentMethods);
  // The rules checked the pair (or that payment_methods came instead); a handler reached without them is a bug, not a bad request.
  if (!methods && !findAsset(req.network, req.asset)) throw apiError("internal_error", "A create request reached its handler unchecked.");
  if (Array.isArray(methods) && req.requestedAmount !== undefined) amountForEvery(methods, req.requestedAmount);
  const first = Array.isArray(methods) ? methods[0] : undefined;
  return {
    network: first?.network ?? req.network,
    asset: first?.asset ?? req.asset,
    methods,
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

const methodsHelp = `send a list of {"network", "asset"} such as [{"network": "base", "asset": "USDC"}], or "all"`;

/** payment_methods as sent: "all", or 1 to maxMethods distinct pairs we accept; anything else is 400 naming where. */
export function methodsAsked(value: Value): MethodAsk[] | "all" {
  const kind = value.kind;
  if (kind.case === "stringValue") {
    if (kind.value === "all") return "all";
    throw validationError("payment_methods", `"payment_methods" must be a list or "all"; got ${JSON.stringify(kind.value.slice(0, 40))}: ${methodsHelp}.`);
  }
  if (kind.case !== "listValue") throw validationError("payment_methods", `"payment_methods" must be a list or "all": ${methodsHelp}.`);
  const items = kind.value.values;
  if (items.length === 0) throw validationError("payment_methods", `"payment_methods" is empty: ${methodsHelp}.`);
  if (items.length > maxMethods) throw validationError("payment_methods", `"payment_methods" takes at most ${maxMethods} methods; got ${items.length}.`);
  const seen = new Set<string>();
  return items.map((item, i) => {
    const at = `payment_methods[${i}]`;
    if (item.kind.case !== "structValue") throw validationError(at, `"${at}" must be an object {"network", "asset"}.`);
    const fields = item.kind.value.fields;
    const extra = Object.keys(fields).find((k) => k !== "network" && k !== "asset");
    if (extra !== undefined) throw validationError(`${at}.${extra}`, `"${at}" takes only "network" and "asset"; "${extra.slice(0, 40)}" is not known.`);
    const text = (name: "network" | "asset") => {
      const v = fields[name]?.kind;
      if (v?.case !== "stringValue" || v.value === "") throw validationError(`${at}.${name}`, `"${at}.${name}" is missing or not a string.`);
      return v.value;
    };
    const network = text("network");
    const asset = text("asset");
    const networks = [...new Set(assets.map((a) => a.network))];
    if (!networks.includes(network)) throw validationError(`${at}.network`, `"${at}.network" must be one of ${networks.join(", ")}; got ${JSON.stringify(network.slice(0, 40))}.`);
    if (!findAsset(network, asset)) {
      const onNetwork = assets.filter((a) => a.network === network).map((a) => a.asset);
      throw validationError(`${at}.asset`, `"${at}.asset" ${JSON.stringify(asset.slice(0, 40))} is not supported on ${network}; supported: ${onNetwork.join(", ")}.`);
    }
    const key = `${network}/${asset}`;
    if (seen.has(key)) throw validationError(at, `"${at}" repeats ${asset} on ${network}: name each method once.`);
    seen.add(key);
    return { network, asset };
  });
}

/**
 * An amount in an asset (requested_amount) serves several methods only when they all are of that
 * asset: otherwise the intent must be priced in a currency. Its places are checked against each.
 */
function amountForEvery(methods: readonly MethodAsk[], amount: string): void {
  const kinds = [...new Set(methods.map((m) => m.asset))];
  if (kinds.length > 1) {
    throw validationError(
      "price_amount",
      `Methods of several assets (${kinds.join(", ")}) need a price in a currency: send "price_amount" and "price_currency" instead of "requested_amount", and each method is quoted from it.`,
    );
  }
  for (const m of methods) {
    const decimals = findAsset(m.network, m.asset)?.decimals ?? 0;
    const checked = checkRequestedAmount(amount, decimals);
    if (!checked.ok) throw validationError("requested_amount", `"requested_amount" ${checked.reason} (${m.asset} on ${m.network}).`);
  }
}
