import { createHmac } from "node:crypto";

/**
 * X-Service-Signature: lowercase hex HMAC-SHA256, keyed with the endpoint's
 * signing secret (the whole "whsec_..." string as UTF-8), over the bytes of
 * `timestamp + "." + body`.
 */
export function signPayload(secret: string, timestamp: number, body: Buffer | string): string {
  return createHmac("sha256", secret).update(`${timestamp}.`).update(body).digest("hex");
}

/**
 * The header's value: one signature per secret, comma-separated, the current secret's first.
 * During a rotation's overlap a receiver still holding the previous secret finds its match in
 * the list, and one holding the new secret finds it first.
 */
export function signatureHeader(secrets: readonly string[], timestamp: number, body: Buffer | string): string {
  return secrets.map((s) => signPayload(s, timestamp, body)).join(",");
}
