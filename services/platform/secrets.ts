import { createCipheriv, createDecipheriv, createHmac, randomBytes } from "node:crypto";
import { deriveKey } from "./secret-key.ts";

/** A new signing secret: "whsec_" and 32 random bytes, base64url. */
export function generateSigningSecret(): string {
  return `whsec_${randomBytes(32).toString("base64url")}`;
}

const ivBytes = 12;
const tagBytes = 16;
const keyIdBytes = 8;
/** Layout versions (first byte): sealed before key ids existed (the migration marked them), and with a key id. */
const legacy = 0x00;
const withKeyId = 0x01;

/** A sealed secret that no key of this process opens: a terminal, named outcome, never worth a retry. */
export class SecretUnreadable extends Error {
  constructor(reason: string) {
    super(reason);
    this.name = "SecretUnreadable";
  }
}

/** What a key is known by without giving it away: HMACs of fixed labels under it. */
function fingerprint(key: Buffer): { keyId: string; check: string } {
  return {
    keyId: createHmac("sha256", key).update("signing-secret key id").digest().subarray(0, keyIdBytes).toString("hex"),
    check: createHmac("sha256", key).update("signing-secret key check value").digest("hex"),
  };
}

export interface KeyFingerprint {
  keyId: string;
  /** The key check value stored in the database (secret_key_check). */
  check: string;
}

/**
 * Encrypts signing secrets at rest with AES-256-GCM. The endpoint id is the
 * associated data, so a ciphertext copied onto another endpoint's row does not decrypt.
 * Stored layout: 0x01 | key id (8) | iv (12) | tag (16) | ciphertext, sealed under the current
 * key (or the one sealUnder names); a box given the previous key too (a key rotation) opens what
 * either sealed. Secrets
 * sealed before key ids existed are 0x00 | iv | tag | ciphertext.
 */
export class SecretBox {
  readonly current: KeyFingerprint;
  readonly previous: KeyFingerprint | undefined;
  #sealing: { keyId: string; key: Buffer };
  readonly #keys = new Map<string, Buffer>();

  constructor(key: Buffer, previousKey?: Buffer) {
    for (const k of [key, previousKey]) if (k && k.length !== 32) throw new Error("SecretBox needs 32-byte keys");
    this.current = fingerprint(key);
    this.#sealing = { keyId: this.current.keyId, key };
    this.#keys.set(this.current.keyId, key);
    this.previous = previousKey ? fingerprint(previousKey) : undefined;
    if (previousKey && this.previous) this.#keys.set(this.previous.keyId, previousKey);
  }

  /** The box for the master keys (SECRET_ENCRYPTION_KEY, and SECRET_ENCRYPTION_KEY_PREVIOUS during a rotation). */
  static fromMasterKeys(master: Buffer, previousMaster?: Buffer): SecretBox {
    const purpose = "webhook-signing-secrets";
    return new SecretBox(deriveKey(master, purpose), previousMaster ? deriveKey(previousMaster, purpose) : undefined);
  }

  /**
   * Seals under the key with this id from now on (the one the database's key check names): during a
   * key rotation, processes given both keys keep sealing under the old one until the reseal has
   * moved the check, so a process not yet given the new key still opens everything.
   */
  sealUnder(keyId: string): void {
    const key = this.#keys.get(keyId);
    if (key) this.#sealing = { keyId, key };
  }

  /** Whether this box has the key with this id. */
  has(keyId: string): boolean {
    return this.#keys.has(keyId);
  }

  seal(endpointId: string, secret: string): Buffer {
    const iv = randomBytes(ivBytes);
    const cipher = createCipheriv("aes-256-gcm", this.#sealing.key, iv);
    cipher.setAAD(Buffer.from(endpointId, "utf8"));
    const ciphertext = Buffer.concat([cipher.update(secret, "utf8"), cipher.final()]);
    return Buffer.concat([Buffer.from([withKeyId]), Buffer.from(this.#sealing.keyId, "hex"), iv, cipher.getAuthTag(), ciphertext]);
  }

  /** The id of the key a secret was sealed under; undefined for one sealed before key ids. */
  static keyIdOf(sealed: Buffer): string | undefined {
    return sealed[0] === withKeyId ? sealed.subarray(1, 1 + keyIdBytes).toString("hex") : undefined;
  }

  /** Throws SecretUnreadable when the data was altered, belongs to another endpoint, or was sealed under a key this box lacks. */
  open(endpointId: string, sealed: Buffer): string {
    if (sealed[0] === withKeyId) {
      const keyId = SecretBox.keyIdOf(sealed)!;
      const key = this.#keys.get(keyId);
      if (!key) throw new SecretUnreadable(`sealed under encryption key ${keyId}, which this process was not given`);
      const body = sealed.subarray(1 + keyIdBytes);
      const opened = decrypt(key, endpointId, body);
      if (opened === undefined) throw new SecretUnreadable(`does not decrypt under encryption key ${keyId} (altered, or another endpoint's)`);
      return opened;
    }
    if (sealed[0] === legacy) {
      for (const key of this.#keys.values()) {
        const opened = decrypt(key, endpointId, sealed.subarray(1));
        if (opened !== undefined) return opened;
      }
      throw new SecretUnreadable("sealed before key ids, and no key this process was given decrypts it");
    }
    throw new SecretUnreadable("not a sealed secret");
  }
}

function decrypt(key: Buffer, endpointId: string, body: Buffer): string | undefined {
  if (body.length < ivBytes + tagBytes) return undefined;
  try {
    const decipher = createDecipheriv("aes-256-gcm", key, body.subarray(0, ivBytes));
    decipher.setAAD(Buffer.from(endpointId, "utf8"));
    decipher.setAuthTag(body.subarray(ivBytes, ivBytes + tagBytes));
    return Buffer.concat([decipher.update(body.subarray(ivBytes + tagBytes)), decipher.final()]).toString("utf8");
  } catch {
    return undefined;
  }
}
