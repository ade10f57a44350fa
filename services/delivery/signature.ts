import { createHmac } from "node:crypto";

/** Every delivery's User-Agent (and `listen`'s forwards). */
export const userAgent = "PaymentIntentService-Webhooks/1.0";

/**
 * X-Service-Signature: lowercase hex HMAC-SHA256, keyed with the endpoint's
 * signing secret (the whole "whsec_..." string as UTF-8), over the bytes of
 * `timestamp + "." + body`.
 */
export function signPayload(secret: string, timestamp: number, body: Buffer | string): string {
  return createHmac("sha256", secret).update(`${timestamp}.`).update(body).digest("hex");
}

/**
 * The signature headers of one attempt. X-Service-Signature is always exactly one signature, as
 * the spec says, made with the secret the receiver is known to hold: during a rotation's overlap
 * the previous one (the receiver may not have the new secret yet), otherwise the current one.
 * During the overlap X-Service-Signature-Next carries the new secret's signature, so a receiver
 * that has already switched keeps verifying too.
 */
export function signatureHeaders(current: string, previous: string | undefined, timestamp: number, body: Buffer | string): Record<string, string> {
  if (previous === undefined) return { "x-service-signature": signPayload(current, timestamp, body) };
  return {
    "x-service-signature": signPayload(previous, timestamp, body),
    "x-service-signature-next": signPayload(current, timestamp, body),
  };
}
