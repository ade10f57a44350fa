/** Every event a merchant can receive; the intents domain emits all but webhook.test. */
export const eventTypes = [
  "payment.intent.created",
  "payment.confirmed",
  "payment.reorged",
  "payment.cancelled",
  "payment.expired",
  "payment.underpaid",
  "payment.overpaid",
  "payment.late",
  "webhook.test",
] as const;
export type EventType = (typeof eventTypes)[number];

/**
 * Event types beyond the spec's list: ours. An endpoint turned off by the service
 * (auto-disable) is announced to the merchant's other enabled endpoints.
 */
export const extensionEventTypes = ["webhook_endpoint.disabled", "payment.detected", "payment.exception", "payment.valued", "payment.requoted"] as const;
export type ExtensionEventType = (typeof extensionEventTypes)[number];

/**
 * Types delivered only to endpoints whose enabled_events name them: "*" does not take them, so a
 * receiver written against the spec's list is never sent a type it does not know.
 * payment.detected: an intent first saw funds that do not count yet (a bitcoin payment in the mempool).
 * payment.exception: a payment to an intent's address that will never count for it (another asset, or after it stopped taking payments).
 * payment.valued: payments of a fiat-priced intent valued in its currency after they were seen, no rate being fresh then (intents/valuation.ts).
 * payment.requoted: a fiat-priced intent's quote lapsed and what was still due was priced again at the rate of the moment (intents/requote.ts).
 */
export const optInEventTypes: readonly string[] = ["payment.detected", "payment.exception", "payment.valued", "payment.requoted"];

/** An endpoint's enabled_events entry that stands for every type (Stripe's), opt-in ones aside. */
export const allEvents = "*";

/** Whether an endpoint with `enabled` receives events of `type`. */
export function receives(enabled: readonly string[], type: string): boolean {
  return enabled.includes(type) || (enabled.includes(allEvents) && !optInEventTypes.includes(type));
}
