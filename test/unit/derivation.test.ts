// Built-in Test addresses derived on the derivation thread are the same as derived in place,
// and a pending derivation keeps the process alive only while it is awaited.
import t from "tap";
import { derivationThread } from "../../services/addresses/derivation.ts";
import { builtinAddress } from "../../services/addresses/keys.ts";

t.test("the thread derives what keys.ts derives", async (t) => {
  for (const network of ["bitcoin", "ethereum", "polygon", "base", "arbitrum", "tron", "solana"]) {
    const indices = [0, 1, 63, 1000, 2 ** 31 - 1];
    t.same(await derivationThread.derive(network, indices), indices.map((i) => builtinAddress(network, i)), network);
  }
});

t.test("past its first thousand addresses the thread derives with a bigger table, to the same addresses", async (t) => {
  const blocks = Array.from({ length: 18 }, (_, b) => Array.from({ length: 64 }, (_, i) => 5000 + b * 64 + i));
  const derived: string[][] = [];
  for (const block of blocks) derived.push(await derivationThread.derive("ethereum", block));
  // Spot checks on either side of the switch (1 024 addresses in), against derivation in place.
  for (const [b, i] of [[0, 0], [15, 63], [16, 0], [17, 5], [17, 63]] as const) {
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
