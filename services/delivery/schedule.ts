/**
 * The retry schedule as JetStream runs it. With `backoff` set, the server
 * redelivers an unacknowledged message backoff[n-1] after delivery n (or after
 * the last working() signal), repeating the last value, and stops after
 * max_deliver deliveries; its ack wait becomes backoff[0]. JetStream requires
 * max_deliver > backoff.length, so the list is cut to max attempts - 1.
 */
export interface Schedule {
  maxAttempts: number;
  /** Delays between attempts, ms. */
  backoffMs: number[];
}

export function schedule(delaysSeconds: readonly number[], maxAttempts: number): Schedule {
  const backoffMs = delaysSeconds.slice(0, Math.max(1, maxAttempts - 1)).map((s) => Math.round(s * 1000));
  return { maxAttempts, backoffMs: maxAttempts > 1 ? backoffMs : [] };
}

/** How long after attempt `attempt` (1-based) the next one comes; also that attempt's ack deadline. */
export function delayAfter(s: Schedule, attempt: number): number {
  const list = s.backoffMs.length > 0 ? s.backoffMs : [ackWaitWithoutBackoffMs];
  return list[Math.min(attempt, list.length) - 1]!;
}

/**
 * How long after its creation a delivery may still be attempted: the waits between its attempts,
 * and a day for a delivery held up (a broker or worker outage, a republish).
 */
export function attemptSpanSeconds(s: Schedule): number {
  let ms = 0;
  for (let attempt = 1; attempt < s.maxAttempts; attempt++) ms += delayAfter(s, attempt);
  return Math.ceil(ms / 1000) + 86_400;
}

/** Ack wait when there is a single attempt (no backoff list). */
export const ackWaitWithoutBackoffMs = 60_000;

/**
 * The delay to send with a NAK so that the server redelivers `waitMs` from now. A delayed NAK
 * backdates the message by the consumer's ack wait (= backoff[0]) and checkPending then measures
 * it against the backoff entry of its delivery count, so the server waits
 * delay + backoff[min(n-1, last)] − backoff[0] (nats-server consumer.go, processNak and
 * checkPending, the same from 2.9.10 to 2.14). Unlike a message left unacknowledged, a delayed NAK
 * also re-arms the consumer's redelivery timer (nats-server #6085).
 */
export function nakDelayFor(s: Schedule, deliveryCount: number, waitMs: number): number {
  const list = s.backoffMs.length > 0 ? s.backoffMs : [ackWaitWithoutBackoffMs];
  const delay = waitMs - list[Math.min(Math.max(deliveryCount, 1), list.length) - 1]! + list[0]!;
  // 0 would be sent as a bare NAK, which redelivers at once.
  return delay === 0 ? 1 : delay;
}

/**
 * Whether a delayed NAK of delivery `deliveryCount` can bring the message back as soon as
 * `waitMs` from now. It cannot when that delivery's backoff entry exceeds the first by more than
 * `waitMs` (see nakDelayFor): the server would hold it longer.
 */
export function nakReaches(s: Schedule, deliveryCount: number, waitMs: number): boolean {
  const list = s.backoffMs.length > 0 ? s.backoffMs : [ackWaitWithoutBackoffMs];
  return waitMs - list[Math.min(Math.max(deliveryCount, 1), list.length) - 1]! + list[0]! >= 1;
}
