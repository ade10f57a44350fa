// Built-in Test addresses derived on the derivation thread are the same as derived in place,
// and a pending derivation keeps the process alive only while it is awaited.
import t from "tap";
import { derivationThread } from "../../services/addresses/derivation.ts";
import { builtinAddress } from "../../services/addresses/keys.ts";

t.test("the thread derives what keys.ts derives", async (t) => {
  for (const network of ["bitcoin", "ethereum", "polygon", "tron", "solana"]) {
    const indices = [0, 1, 63, 1000, 2 ** 31 - 1];
    t.same(await derivationThread.derive(network, indices), indices.map((i) => builtinAddress(network, i)), network);
  }
});

t.test("a bad request fails like derivation in place", async (t) => {
  t.same(await derivationThread.derive("ethereum", []), [], "nothing asked, nothing derived");
  t.throws(() => builtinAddress("dogecoin", 0), /no built-in Test key/);
  // An error on the thread falls back to deriving in place, which throws the same error.
  t.throws(() => builtinAddress("ethereum", -1), RangeError);
  await t.rejects(derivationThread.derive("ethereum", [-1]), RangeError);
});
