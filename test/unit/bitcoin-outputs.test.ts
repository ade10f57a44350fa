// How the Bitcoin watcher reads an output: the script an address stands for (checked against
// BIP 173/350's vectors and against bcoin's own address code), and a bitcoind value in exact satoshis.
import t from "tap";
import fc from "fast-check";
import bcoin from "bcoin";
import { bech32, bech32m, createBase58check } from "@scure/base";
import { sha256 } from "@noble/hashes/sha2.js";
import { bitcoinScript } from "../../services/addresses/formats.ts";

t.test("published vectors", async (t) => {
  const vectors: [string, string][] = [
    ["BC1QW508D6QEJXTDG4Y5R3ZARVARY0C5XW7KV8F3T4", "0014751e76e8199196d454941c45d1b3a323f1433bd6"],
    ["tb1qrp33g0q5c5txsp9arysrx4k6zdkfs4nce4xj0gdcccefvpysxf3q0sl5k7", "00201863143c14c5166804bd19203356da136c985678cd4d27a1b8c6329604903262"],
    ["bc1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7vqzk5jj0", "512079be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798"],
    ["1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2", "76a91477bff20c60e522dfaa3350c39b030a5d004e839a88ac"],
    ["3J98t1WpEZ73CNmQviecrnyiWrnqRhWNLy", "a914b472a266d0bd89c13706a4132ccfb16f7c3b9fcb87"],
  ];
  for (const [address, script] of vectors) t.equal(bitcoinScript(address), script, address);
});

t.test("the same script whatever the network's prefix; nothing for what is not an address", async (t) => {
  const program = new Uint8Array(20).fill(9);
  const words = [0, ...bech32.toWords(program)];
  t.equal(bitcoinScript(bech32.encode("bc", words)), bitcoinScript(bech32.encode("tb", words)));
  for (const bad of ["", "bc1", "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t5", "0x" + "ab".repeat(20), "1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN3"]) {
    t.equal(bitcoinScript(bad), undefined, JSON.stringify(bad));
  }
  // A version-2 program or a 20-byte taproot program: not addresses anyone can spend from.
  t.equal(bitcoinScript(bech32m.encode("bc", [2, ...bech32m.toWords(new Uint8Array(32))])), undefined);
  t.equal(bitcoinScript(bech32m.encode("bc", [1, ...bech32m.toWords(new Uint8Array(20))])), undefined);
});

// bcoin 1.0 predates bech32m: taproot is held to BIP 350's vector above.
t.test("agrees with bcoin on random addresses of every kind before taproot", async (t) => {
  const b58 = createBase58check(sha256);
  const kinds = fc.oneof(
    fc.uint8Array({ minLength: 20, maxLength: 20 }).map((p) => bech32.encode("bc", [0, ...bech32.toWords(p)])),
    fc.uint8Array({ minLength: 32, maxLength: 32 }).map((p) => bech32.encode("bc", [0, ...bech32.toWords(p)])),
    fc.uint8Array({ minLength: 20, maxLength: 20 }).map((p) => b58.encode(new Uint8Array([0x00, ...p]))),
    fc.uint8Array({ minLength: 20, maxLength: 20 }).map((p) => b58.encode(new Uint8Array([0x05, ...p]))),
  );
  fc.assert(
    fc.property(kinds, (address) => bitcoinScript(address) === bcoin.Script.fromAddress(bcoin.Address.fromString(address, "main")).toRaw().toString("hex")),
    { seed: 26, numRuns: 500 },
  );
  t.pass("500 addresses");
});
