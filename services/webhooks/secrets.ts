import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";

/** A new signing secret: "whsec_" and 32 random bytes, base64url. */
export function generateSigningSecret(): string {
  return `whsec_${randomBytes(32).toString("base64url")}`;
}

const ivBytes = 12;
const tagBytes = 16;

/**
 * Encrypts signing secrets at rest with AES-256-GCM. The endpoint id is the
 * associated data, so a ciphertext copied onto another endpoint's row does not decrypt.
 * Stored layout: iv (12) | tag (16) | ciphertext.
 */
export class SecretBox {
  readonly #key: Buffer;

  constructor(key: Buffer) {
    if (key.length !== 32) throw new Error("SecretBox needs a 32-byte key");
    this.#key = key;
  }

  seal(endpointId: string, secret: string): Buffer {
    const iv = randomBytes(ivBytes);
    const cipher = createCipheriv("aes-256-gcm", this.#key, iv);
    cipher.setAAD(Buffer.from(endpointId, "utf8"));
    const ciphertext = Buffer.concat([cipher.update(secret, "utf8"), cipher.final()]);
    return Buffer.concat([iv, cipher.getAuthTag(), ciphertext]);
  }

  /** Throws when the data was altered, belongs to another endpoint, or was sealed under another key. */
  open(endpointId: string, sealed: Buffer): string {
    const decipher = createDecipheriv("aes-256-gcm", this.#key, sealed.subarray(0, ivBytes));
    decipher.setAAD(Buffer.from(endpointId, "utf8"));
    decipher.setAuthTag(sealed.subarray(ivBytes, ivBytes + tagBytes));
    return Buffer.concat([decipher.update(sealed.subarray(ivBytes + tagBytes)), decipher.final()]).toString("utf8");
  }
}
