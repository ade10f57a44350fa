// Built-in Test addresses derived on the derivation thread are the same as derived in place,
// and a pending derivation keeps the process alive only while it is awaited.
import t from "tap";
import { derivationThread } from "../../services/addresses/derivation.ts";
import { BaseTable } from "../../services/addresses/base-table.ts";
import { builtinAddress, builtinAddresses, useBaseTable } from "../../services/addresses/keys.ts";

t.test("the thread derives what keys.ts derives", async (t) => {
  for (const network of ["bitcoin", "ethereum", "polygon", "base", "arbitrum", "tron", "solana"]) {
    const indices = [0, 1, 63, 1000, 2 ** 31 - 1];
    t.same(await derivationThread.derive(network, indices), indices.map((i) => builtinAddress(network, i)), network);
  }
});

t.test("past its first thousand addresses the thread derives with a bigger table, to the same addresses", async (t) => {
  // The table is built from 1 024 addresses in, a row between requests (26 rows): asked one block
  // at a time, it is in use well before the 48th.
  const blocks = Array.from({ length: 48 }, (_, b) => Array.from({ length: 64 }, (_, i) => 5000 + b * 64 + i));
  const derived: string[][] = [];
  for (const block of blocks) derived.push(await derivationThread.derive("ethereum", block));
  // Spot checks before, during and after the build, against derivation in place.
  for (const [b, i] of [[0, 0], [15, 63], [16, 0], [30, 5], [47, 0], [47, 63]] as const) {
    t.equal(derived[b]![i], builtinAddress("ethereum", blocks[b]![i]!), `block ${b}, address ${i}`);
  }
  t.same(await derivationThread.derive("bitcoin", [0, 7]), [builtinAddress("bitcoin", 0), builtinAddress("bitcoin", 7)], "and for another network");
});

t.test("a bad request fails like derivation in place", async (t) => {
  t.same(await derivationThread.derive("ethereum", []), [], "nothing asked, nothing derived");
  t.throws(() => builtinAddress("dogecoin", 0), /no built-in Test key/);
  // An error on the thread falls back to deriving in place, which throws the same error.
  t.throws(() => builtinAddress("ethereum", -1), RangeError);
  await t.rejects(derivationThread.derive("ethereum", [-1]), RangeError);
});

// Last: it gives this process the table for the rest of the file.
t.test("derivation in place with the comb table gives the addresses it gave without it", async (t) => {
  const one = [0, 1, 1023, 2 ** 31 - 1];
  const block = Array.from({ length: 40 }, (_, i) => 9000 + i * 13);
  const before = { one: one.map((i) => builtinAddress("ethereum", i)), block: builtinAddresses("ethereum", block), bitcoin: builtinAddresses("bitcoin", block) };
  useBaseTable(new BaseTable(10));
  t.same(one.map((i) => builtinAddress("ethereum", i)), before.one, "one at a time");
  t.same(builtinAddresses("ethereum", block), before.block, "a block at once (affine sums)");
  t.same(builtinAddresses("bitcoin", block), before.bitcoin, "another network's key");
});
