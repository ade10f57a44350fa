// The comb table's k·G (and start + k·G for many k at once) is noble's, at the edges of its
// windows, where a sum meets a table entry (a doubling, or the point at infinity), and at random.
import fc from "fast-check";
import t from "tap";
import { secp256k1 } from "@noble/curves/secp256k1.js";
import { BaseTable } from "../../services/addresses/base-table.ts";

const G = secp256k1.Point.BASE;
const n = secp256k1.Point.Fn.ORDER;

for (const w of [3, 8]) {
  t.test(`w=${w}: the comb's k·G equals noble's`, async (t) => {
    const table = new BaseTable(w);
    const W = BigInt(w);
    const edges = [1n, 2n, (1n << W) - 1n, 1n << W, (1n << W) + 1n, (1n << (2n * W)) - 1n, 1n << 255n, n - 1n, n - 2n, (n - 1n) >> 1n];
    for (const k of edges) t.ok(table.multiply(k).equals(G.multiply(k)), `k = ${k.toString(16)}`);
    t.ok(table.multiply(0n).equals(secp256k1.Point.ZERO), "0·G is the point at infinity");
    fc.assert(
      fc.property(fc.bigInt({ min: 1n, max: n - 1n }), (k) => table.multiply(k).equals(G.multiply(k))),
      { numRuns: 200 },
    );
  });
}

t.test("many at once: start + k·G for each k, also where a sum meets a table entry", async (t) => {
  const table = new BaseTable(8);
  const expect = (ks: bigint[], start?: typeof G) => ks.map((k) => (k === 0n ? (start ?? secp256k1.Point.ZERO) : start ? start.add(G.multiply(k)) : G.multiply(k)));
  const same = (a: (typeof G)[], b: (typeof G)[]) => a.length === b.length && a.every((p, i) => p.equals(b[i]!));
  const filler = Array.from({ length: 20 }, (_, i) => 1000n + BigInt(i) * 7919n);
  // G + 1·G doubles; -G + 1·G is the point at infinity; 256·G meets row 1's first entry after
  // 0 from row 0; k twice in one batch; 0 leaves the start as it is.
  const edges = [1n, 256n, 257n, n - 1n, 0n, 5n, 5n, ...filler];
  t.ok(same(table.multiplyMany(edges, G), expect(edges, G)), "from G (a doubling at k = 1)");
  t.ok(same(table.multiplyMany(edges, G.negate()), expect(edges, G.negate())), "from -G (the point at infinity at k = 1, then more added to it)");
  t.ok(same(table.multiplyMany(edges), expect(edges)), "from the point at infinity");
  t.ok(same(table.multiplyMany(edges.slice(0, 5), G), expect(edges.slice(0, 5), G)), "a few at once (added projectively)");
  fc.assert(
    fc.property(fc.array(fc.bigInt({ min: 0n, max: n - 1n }), { minLength: 1, maxLength: 40 }), fc.bigInt({ min: 1n, max: n - 1n }), (ks, s) => {
      const start = G.multiply(s);
      return same(table.multiplyMany(ks, start), expect(ks, start));
    }),
    { numRuns: 30 },
  );
  t.throws(() => table.multiplyMany([...filler, -1n]), RangeError, "a scalar out of range is refused");
});

t.test("scalars outside 0 … 2^256 - 1 and bad windows are refused", async (t) => {
  const table = new BaseTable(4);
  t.throws(() => table.multiply(-1n), RangeError);
  t.throws(() => table.multiply(1n << 256n), RangeError);
  t.throws(() => new BaseTable(0), RangeError);
  t.throws(() => new BaseTable(17), RangeError);
});

t.test("built a row at a time (the derivation thread, between requests): a step per row, then the same table", async (t) => {
  const w = 6;
  const build = BaseTable.build(w);
  let steps = 0;
  let next = build.next();
  for (; !next.done; next = build.next()) steps++;
  t.equal(steps, Math.ceil(256 / w), "one step for each of its rows");
  const table = next.value;
  fc.assert(
    fc.property(fc.bigInt({ min: 1n, max: n - 1n }), (k) => table.multiply(k).equals(G.multiply(k))),
    { numRuns: 100 },
  );
  const ks = Array.from({ length: 20 }, (_, i) => 31n + BigInt(i) * 104729n);
  t.ok(table.multiplyMany(ks).every((p, i) => p.equals(G.multiply(ks[i]!))), "many at once too");
  t.throws(() => BaseTable.build(0).next(), RangeError, "a bad window is refused at its first step");
});
