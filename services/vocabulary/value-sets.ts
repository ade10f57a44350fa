/**
 * The named sets a request field's value may have to come from: the `one_of` of a field's
 * (payments.v1.field) rules names one. The RPC server checks against them
 * (services/rpc/field-rules.ts) and the OpenAPI document lists them (scripts/protoc-gen-openapi.ts),
 * both from here.
 */
import { assets, assetsOn, networks } from "./assets.ts";
import { currencyCodes } from "./currencies.ts";
import { allEvents, eventTypes, extensionEventTypes } from "./event-types.ts";
import { scopes } from "./scopes.ts";

/** The Payment Intent statuses (the status machine is services/intents/status.ts). */
export const intentStatuses = ["pending", "underpaid", "confirmed", "overpaid", "cancelled", "expired", "late"] as const;

/** The delivery statuses (their moves: services/delivery/webhook-deliveries.ts). */
export const deliveryStatuses = ["pending", "processing", "delivered", "failed"] as const;

/** The outcomes a Test intent can be driven to (services/sandbox/simulate.ts). */
export const simulateOutcomes = ["confirmed", "underpaid", "overpaid", "expired", "late", "reorged", "detected", "wrong_asset", "quote_lapsed"] as const;

export interface ValueSet {
  /** Every value the set may take. */
  readonly values: readonly string[];
  /**
   * When the values depend on another field of the same request: the set that field is checked
   * against, and the values allowed for each of its values (the assets of a network).
   */
  readonly dependsOn?: { readonly set: string; readonly valuesFor: (given: string) => readonly string[] };
}

export const valueSets: Readonly<Record<string, ValueSet>> = {
  network: { values: networks },
  asset: { values: [...new Set(assets.map((a) => a.asset))], dependsOn: { set: "network", valuesFor: assetsOn } },
  intent_status: { values: intentStatuses },
  delivery_status: { values: deliveryStatuses },
  simulate_outcome: { values: simulateOutcomes },
  event_filter: { values: [allEvents, ...eventTypes, ...extensionEventTypes] },
  currency: { values: currencyCodes },
  refund_rate: { values: ["quoted", "current"] },
  scope: { values: scopes },
};
