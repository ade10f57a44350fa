import { secp256k1 } from "@noble/curves/secp256k1.js";
import { normalizeZ } from "@noble/curves/abstract/curve.js";
import type { WeierstrassPoint } from "@noble/curves/abstract/weierstrass.js";

type Point = WeierstrassPoint<bigint>;

/**
 * k·G by a comb of unsigned w-bit windows: row i holds d·2^(w·i)·G for every digit d, so k·G is
 * the sum of one entry per nonzero digit of k, ceil(256/w) additions and no doublings. Variable
 * time, so only for public scalars (those derived from an extended public key). noble's own
 * precomputed multiplication runs its constant-time kernel, a real and a fake addition per
 * window: twice the additions for a table of the same size.
 */
export class BaseTable {
  readonly #w: number;
  readonly #mask: bigint;
  readonly #rows: Point[][] = [];

  constructor(w: number) {
    if (!Number.isInteger(w) || w < 1 || w > 16) throw new RangeError("window must be 1 to 16 bits");
    this.#w = w;
    this.#mask = (1n << BigInt(w)) - 1n;
    const P = secp256k1.Point;
    let base: Point = P.BASE;
    for (let i = 0; i * w < 256; i++) {
      const row: Point[] = [base];
      for (let d = 2; d < 1 << w; d++) row.push(row[row.length - 1]!.add(base));
      const next = row[row.length - 1]!.add(base);
      // Affine (one shared inversion per row): cheaper to add.
      this.#rows.push(normalizeZ(P, row));
      base = next;
    }
  }

  /** k·G for 0 ≤ k < 2^256. */
  multiply(k: bigint): Point {
    if (k < 0n || k >> 256n !== 0n) throw new RangeError("scalar out of range");
    const shift = BigInt(this.#w);
    let sum: Point = secp256k1.Point.ZERO;
    for (let i = 0; k !== 0n; i++, k >>= shift) {
      const digit = Number(k & this.#mask);
      if (digit !== 0) sum = sum.add(this.#rows[i]![digit - 1]!);
    }
    return sum;
  }
}
