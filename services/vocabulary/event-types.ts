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
export const extensionEventTypes = [
  "webhook_endpoint.disabled",
  "payment.detected",
  "payment.exception",
  "payment.valued",
  "payment.requoted",
  // A refund's moves (services/refunds/refunds.ts), each carrying the refund and its intent.
  "refund.created",
  "refund.address_received",
  "refund.sent",
  "refund.completed",
  "refund.reorged",
  "refund.cancelled",
] as const;
export type ExtensionEventType = (typeof extensionEventTypes)[number];

/** An endpoint's enabled_events entry that stands for every type (Stripe's), those added later included. */
export const allEvents = "*";

/**
 * Whether an endpoint with `enabled` receives events of `type`. "*" takes every type, our
 * extensions included (payment.detected, payment.exception, payment.valued, payment.requoted):
 * receivers ignore a type they do not know (docs/webhooks.md), and a merchant whose endpoint was
 * made the default way must hear of a payment in the wrong asset. Until
 * Migration20261202150000_EveryEventType it left those four out; endpoints made before it have
 * the list it took then instead of "*", so they receive exactly what they did.
 */
export function receives(enabled: readonly string[], type: string): boolean {
  return enabled.includes(allEvents) || enabled.includes(type);
}
