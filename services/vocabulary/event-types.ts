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
export const extensionEventTypes = ["webhook_endpoint.disabled"] as const;
export type ExtensionEventType = (typeof extensionEventTypes)[number];

/** An endpoint's enabled_events entry that stands for every type (Stripe's). */
export const allEvents = "*";

/** Whether an endpoint with `enabled` receives events of `type`. */
export function receives(enabled: readonly string[], type: string): boolean {
  return enabled.includes(allEvents) || enabled.includes(type);
}
