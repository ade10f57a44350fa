// The comb table's k·G is noble's k·G, at the edges of its windows and for random scalars.
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

t.test("scalars outside 0 … 2^256 - 1 and bad windows are refused", async (t) => {
  const table = new BaseTable(4);
  t.throws(() => table.multiply(-1n), RangeError);
  t.throws(() => table.multiply(1n << 256n), RangeError);
  t.throws(() => new BaseTable(0), RangeError);
  t.throws(() => new BaseTable(17), RangeError);
});
