import { createHmac } from "node:crypto";

/**
 * X-Service-Signature: lowercase hex HMAC-SHA256, keyed with the endpoint's
 * signing secret (the whole "whsec_..." string as UTF-8), over the bytes of
 * `timestamp + "." + body`.
 */
export function signPayload(secret: string, timestamp: number, body: Buffer | string): string {
  return createHmac("sha256", secret).update(`${timestamp}.`).update(body).digest("hex");
}
