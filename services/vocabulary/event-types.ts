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
