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

/** Characters of a timed identifier's creation time, then of its random part (~107 bits). */
const timeChars = 8;
const timedRandomChars = 18;

/** A millisecond count as `timeChars` base62 characters, most significant first (62^8 ms is about 6 900 years). */
function base62Time(ms: number): string {
  let out = "";
  for (let i = 0, n = Math.floor(ms); i < timeChars; i++, n = Math.floor(n / 62)) out = alphabet[n % 62] + out;
  return out;
}

/**
 * Identifiers of rows in time-partitioned tables (webhook events and deliveries): the row's
 * created_at to the millisecond, then 18 random base62 characters. A lookup by id alone then
 * reads only the partition of that day (idTime, and the database's payments_id_time). 26
 * characters after the prefix, where newId makes 24: an id of the older shape has no time.
 */
export function newTimedIds(prefix: string, at: Date, count: number): string[] {
  const time = base62Time(at.getTime());
  const text = randomBase62(timedRandomChars * count);
  return Array.from({ length: count }, (_, i) => `${prefix}_${time}${text.slice(i * timedRandomChars, (i + 1) * timedRandomChars)}`);
}

export function newTimedId(prefix: string, at: Date): string {
  return newTimedIds(prefix, at, 1)[0] as string;
}

const timedShape = new RegExp(`^[a-z]+_[0-9A-Za-z]{${timeChars + timedRandomChars}}$`);

/** The creation time a timed identifier carries; undefined for any other string (an id of the older shape included). */
export function idTime(id: string): Date | undefined {
  if (!timedShape.test(id)) return undefined;
  const digits = id.slice(id.indexOf("_") + 1, id.indexOf("_") + 1 + timeChars);
  let ms = 0;
  for (const c of digits) ms = ms * 62 + alphabet.indexOf(c);
  return new Date(ms);
}
