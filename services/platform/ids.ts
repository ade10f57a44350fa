import { randomBytes } from "node:crypto";

const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/** Uniform random base62 string (rejection sampling, no modulo bias). */
export function randomBase62(length: number): string {
  let out = "";
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < 248) out += alphabet[byte % 62];
      if (out.length === length) break;
    }
  }
  return out;
}

/** Public identifier such as "pi_4f0Xc...": a type prefix and 24 random base62 characters (~143 bits). */
export function newId(prefix: string): string {
  return `${prefix}_${randomBase62(24)}`;
}

/** `count` identifiers as newId makes them, from one draw of random bytes. */
export function newIds(prefix: string, count: number): string[] {
  const text = randomBase62(24 * count);
  return Array.from({ length: count }, (_, i) => `${prefix}_${text.slice(i * 24, i * 24 + 24)}`);
}
