import { secp256k1 } from "@noble/curves/secp256k1.js";
import { normalizeZ } from "@noble/curves/abstract/curve.js";
import type { WeierstrassPoint } from "@noble/curves/abstract/weierstrass.js";

type Point = WeierstrassPoint<bigint>;

/** From this many scalars on, multiplyMany adds in affine coordinates (see there). */
const batchFrom = 16;

function checkScalar(k: bigint): void {
  if (k < 0n || k >> 256n !== 0n) throw new RangeError("scalar out of range");
}

/** A comb table's rows: each row's points in affine form, and their coordinates apart (multiplyMany). */
interface Rows {
  rows: Point[][];
  xs: bigint[][];
  ys: bigint[][];
}

/** Builds the rows of a table of `w`-bit windows, yielding after each one. */
function* buildRows(w: number): Generator<void, Rows, void> {
  if (!Number.isInteger(w) || w < 1 || w > 16) throw new RangeError("window must be 1 to 16 bits");
  const built: Rows = { rows: [], xs: [], ys: [] };
  const P = secp256k1.Point;
  let base: Point = P.BASE;
  for (let i = 0; i * w < 256; i++) {
    const row: Point[] = [base];
    for (let d = 2; d < 1 << w; d++) row.push(row[row.length - 1]!.add(base));
    const next = row[row.length - 1]!.add(base);
    // Affine, as multiplyMany adds them (one inversion for the whole row).
    const affine = normalizeZ(P, row);
    built.rows.push(affine);
    built.xs.push(affine.map((p) => p.X));
    built.ys.push(affine.map((p) => p.Y));
    base = next;
    yield;
  }
  return built;
}

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
  readonly #rows: Point[][];
  /** The rows' affine coordinates, for multiplyMany. */
  readonly #xs: bigint[][];
  readonly #ys: bigint[][];

  constructor(w: number, rows?: Rows) {
    if (!rows) {
      const build = buildRows(w);
      let step = build.next();
      while (!step.done) step = build.next();
      rows = step.value;
    }
    this.#w = w;
    this.#mask = (1n << BigInt(w)) - 1n;
    this.#rows = rows.rows;
    this.#xs = rows.xs;
    this.#ys = rows.ys;
  }

  /**
   * The table built a row at a time: each `next()` builds one of its ceil(256/w) rows (about a
   * fiftieth of a second each for w = 10 on an idle core); the last returns the table. The
   * derivation thread builds it between its requests, so that no request waits for the whole
   * build (half a second idle, seconds on a busy machine).
   */
  static *build(w: number): Generator<void, BaseTable, void> {
    return new BaseTable(w, yield* buildRows(w));
  }

  /** k·G for 0 ≤ k < 2^256. */
  multiply(k: bigint): Point {
    checkScalar(k);
    const shift = BigInt(this.#w);
    let sum: Point = secp256k1.Point.ZERO;
    for (let i = 0; k !== 0n; i++, k >>= shift) {
      const digit = Number(k & this.#mask);
      if (digit !== 0) sum = sum.add(this.#rows[i]![digit - 1]!);
    }
    return sum;
  }

  /**
   * start + k·G for each k (start: the point at infinity if not given), for many scalars at once.
   * The sums are kept in affine coordinates, and each row's additions share one field inversion
   * (Montgomery's trick): about half the cost of projective additions once there are a few
   * dozen scalars. Fewer than that, it adds projectively.
   */
  multiplyMany(ks: readonly bigint[], start?: Point): Point[] {
    const P = secp256k1.Point;
    if (ks.length < batchFrom) return ks.map((k) => (start ? start.add(this.multiply(k)) : this.multiply(k)));
    ks.forEach(checkScalar);
    const Fp = P.Fp;
    const origin = start && !start.is0() ? start.toAffine() : undefined;
    // Each sum: affine x and y, or undefined for the point at infinity.
    const xs: (bigint | undefined)[] = ks.map(() => origin?.x);
    const ys: (bigint | undefined)[] = ks.map(() => origin?.y);
    const rest = [...ks];
    const shift = BigInt(this.#w);
    for (let i = 0; i < this.#rows.length; i++) {
      const adding: { j: number; x: bigint; y: bigint }[] = [];
      for (let j = 0; j < rest.length; j++) {
        const digit = Number(rest[j]! & this.#mask);
        rest[j] = rest[j]! >> shift;
        if (digit === 0) continue;
        const x = this.#xs[i]![digit - 1]!;
        const y = this.#ys[i]![digit - 1]!;
        if (xs[j] === undefined) {
          xs[j] = x;
          ys[j] = y;
        } else if (xs[j] === x) {
          // The sum so far is ± this entry: a doubling or the point at infinity, left to noble.
          const sum = P.fromAffine({ x, y: ys[j]! }).add(P.fromAffine({ x, y }));
          const a = sum.is0() ? undefined : sum.toAffine();
          xs[j] = a?.x;
          ys[j] = a?.y;
        } else {
          adding.push({ j, x, y });
        }
      }
      if (adding.length === 0) continue;
      const inverses = Fp.invertBatch(adding.map(({ j, x }) => Fp.sub(x, xs[j]!)));
      adding.forEach(({ j, x, y }, n) => {
        const x1 = xs[j]!;
        const y1 = ys[j]!;
        const slope = Fp.mul(Fp.sub(y, y1), inverses[n]!);
        const x3 = Fp.sub(Fp.sub(Fp.sqr(slope), x1), x);
        xs[j] = x3;
        ys[j] = Fp.sub(Fp.mul(slope, Fp.sub(x1, x3)), y1);
      });
    }
    return xs.map((x, j) => (x === undefined ? P.ZERO : P.fromAffine({ x, y: ys[j]! })));
  }
}
