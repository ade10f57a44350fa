import { randomBytes, randomFillSync } from "node:crypto";

const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

// Random bytes are drawn from the CSPRNG 4 KiB at a time and each byte is used once: a call
// into crypto per identifier was a twentieth of a create's event-loop time.
const pool = Buffer.alloc(4096);
let used = pool.length;

function random(n: number): Uint8Array {
  if (n > pool.length) return randomBytes(n);
  if (used + n > pool.length) {
    randomFillSync(pool);
    used = 0;
  }
  used += n;
  return pool.subarray(used - n, used);
}

/** Uniform random base62 string (rejection sampling, no modulo bias). */
export function randomBase62(length: number): string {
  let out = "";
  while (out.length < length) {
    for (const byte of random(length * 2)) {
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
