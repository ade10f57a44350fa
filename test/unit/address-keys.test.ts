import t from "tap";
import assert from "node:assert/strict";
import fc from "fast-check";
import { HDKey, type Versions } from "@scure/bip32";
import { secp256k1 } from "@noble/curves/secp256k1.js";
import { bech32, createBase58check } from "@scure/base";
import { sha256 } from "@noble/hashes/sha2.js";
import { keccak_256 } from "@noble/hashes/sha3.js";
import { ripemd160 } from "@noble/hashes/legacy.js";
import { hexToBytes } from "@noble/hashes/utils.js";
import {
  SourceKeyError,
  builtinAddresses,
  deriveAddress,
  deriveAddresses,
  parseAccountKey,
  supportsAccountKey,
  testAccountKeys,
  testSolanaAddress,
} from "../../services/addresses/keys.ts";
import { checkAddress, toEip55 } from "../../services/addresses/formats.ts";

// The public BIP39 test mnemonic "abandon ×11 about" (no passphrase). Test-only: the service never sees a seed.
const seed = hexToBytes(
  "5eb00bbddcf069084889a8ab9155568165f5c453ccb85e70811aaed6f6da5fc19a5ac40b389cd370d086206dec8aa6c43daea6690f20ad3d8d48b2d2ce9e38e4",
);
const v: Record<string, Versions> = {
  x: { private: 0x0488ade4, public: 0x0488b21e },
  y: { private: 0x049d7878, public: 0x049d7cb2 },
  z: { private: 0x04b2430c, public: 0x04b24746 },
  t: { private: 0x04358394, public: 0x043587cf },
  v: { private: 0x045f18bc, public: 0x045f1cf6 },
};
const node = (versions: keyof typeof v, path: string) => HDKey.fromMasterSeed(seed, v[versions]).derive(path);
const b58c = createBase58check(sha256);

// BIP-0084 "Test vectors" (bitcoin/bips bip-0084.mediawiki).
const bip84 = {
  rootpriv: "zprvAWgYBBk7JR8Gjrh4UJQ2uJdG1r3WNRRfURiABBE3RvMXYSrRJL62XuezvGdPvG6GFBZduosCc1YP5wixPox7zhZLfiUm8aunE96BBa4Kei5",
  rootpub: "zpub6jftahH18ngZxLmXaKw3GSZzZsszmt9WqedkyZdezFtWRFBZqsQH5hyUmb4pCEeZGmVfQuP5bedXTB8is6fTv19U1GQRyQUKQGUTzyHACMF",
  account0xpub: "zpub6rFR7y4Q2AijBEqTUquhVz398htDFrtymD9xYYfG1m4wAcvPhXNfE3EfH1r1ADqtfSdVCToUG868RvUUkgDKf31mGDtKsAYz2oz2AGutZYs",
  receive0: "bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu",
  receive1: "bc1qnjg0jd8228aq7egyzacy8cys3knf9xvrerkf9g",
};
// BIP44 m/44'/0'/0' and BIP49 m/49'/0'/0' account keys of the same mnemonic.
const bip44BitcoinXpub =
  "xpub6BosfCnifzxcFwrSzQiqu2DBVTshkCXacvNsWGYJVVhhawA7d4R5WSWGFNbi8Aw6ZRc1brxMyWMzG3DSSSSoekkudhUd9yLb6qx39T9nMdj";
const bip49Ypub =
  "ypub6Ww3ibxVfGzLrAH1PNcjyAWenMTbbAosGNB6VvmSEgytSER9azLDWCxoJwW7Ke7icmizBMXrzBx9979FfaHxHcrArf3zbeJJJUZPf663zsP";

function refusal(fn: () => unknown): SourceKeyError {
  try {
    fn();
  } catch (error) {
    if (error instanceof SourceKeyError) return error;
    throw error;
  }
  throw new Error("expected a SourceKeyError");
}

t.test("BIP84 published vectors: account zpub and its receive addresses", async (t) => {
  t.equal(node("z", "m/84'/0'/0'").publicExtendedKey, bip84.account0xpub, "seed derivation agrees with the BIP");
  t.equal(parseAccountKey("bitcoin", "live", bip84.account0xpub), bip84.account0xpub);
  t.equal(deriveAddress("bitcoin", "live", bip84.account0xpub, 0), bip84.receive0);
  t.equal(deriveAddress("bitcoin", "live", bip84.account0xpub, 1), bip84.receive1);
  // Trezor blockbook's fixture for the same zpub.
  t.equal(deriveAddress("bitcoin", "live", bip84.account0xpub, 1234), "bc1q4nm6g46ujzyjaeusralaz2nfv2rf04jjfyamkw");
});

t.test("BIP44 ethereum and tron addresses of the test mnemonic", async (t) => {
  t.equal(deriveAddress("ethereum", "test", testAccountKeys.ethereum, 0), "0x9858EfFD232B4033E47d90003D41EC34EcaEda94");
  t.equal(deriveAddress("polygon", "live", testAccountKeys.polygon, 0), "0x9858EfFD232B4033E47d90003D41EC34EcaEda94");
  t.equal(deriveAddress("base", "test", testAccountKeys.base, 0), "0x9858EfFD232B4033E47d90003D41EC34EcaEda94");
  t.equal(deriveAddress("arbitrum", "live", testAccountKeys.arbitrum, 0), "0x9858EfFD232B4033E47d90003D41EC34EcaEda94");
  t.equal(deriveAddress("tron", "test", testAccountKeys.tron, 0), "TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH");
  t.equal(deriveAddress("bitcoin", "test", testAccountKeys.bitcoin, 0), "tb1q6rz28mcfaxtmd6v789l9rrlrusdprr9pqcpvkl");
});

t.test("public derivation matches an independent private derivation from the seed", async (t) => {
  for (const index of [0, 1, 7, 1000, 2 ** 31 - 1]) {
    const btc = node("v", `m/84'/1'/0'/0/${index}`).publicKey as Uint8Array;
    const expectedBtc = bech32.encode("tb", [0, ...bech32.toWords(ripemd160(sha256(btc)))]);
    t.equal(deriveAddress("bitcoin", "test", testAccountKeys.bitcoin, index), expectedBtc, `bitcoin ${index}`);

    const evmFrom = (path: string) => {
      const privateKey = node("x", path).privateKey as Uint8Array;
      return keccak_256(secp256k1.getPublicKey(privateKey, false).subarray(1)).subarray(12);
    };
    t.equal(deriveAddress("ethereum", "test", testAccountKeys.ethereum, index), toEip55(evmFrom(`m/44'/60'/0'/0/${index}`)));
    const tron = new Uint8Array([0x41, ...evmFrom(`m/44'/195'/0'/0/${index}`)]);
    t.equal(deriveAddress("tron", "test", testAccountKeys.tron, index), b58c.encode(tron), `tron ${index}`);
  }
});

t.test("testAccountKeys are the test mnemonic's account public keys", async (t) => {
  t.equal(testAccountKeys.bitcoin, node("v", "m/84'/1'/0'").publicExtendedKey, "bitcoin vpub m/84'/1'/0'");
  t.equal(testAccountKeys.ethereum, node("x", "m/44'/60'/0'").publicExtendedKey, "ethereum xpub m/44'/60'/0'");
  t.equal(testAccountKeys.polygon, node("x", "m/44'/60'/0'").publicExtendedKey, "polygon xpub m/44'/60'/0'");
  t.equal(testAccountKeys.base, node("x", "m/44'/60'/0'").publicExtendedKey, "base xpub m/44'/60'/0'");
  t.equal(testAccountKeys.arbitrum, node("x", "m/44'/60'/0'").publicExtendedKey, "arbitrum xpub m/44'/60'/0'");
  t.equal(testAccountKeys.tron, node("x", "m/44'/195'/0'").publicExtendedKey, "tron xpub m/44'/195'/0'");
  for (const [network, key] of Object.entries(testAccountKeys)) {
    t.equal(parseAccountKey(network, "test", key), key, `${network} test key parses in test mode`);
  }
  t.throws(() => parseAccountKey("bitcoin", "live", testAccountKeys.bitcoin), SourceKeyError, "the test vpub is refused live");
});

t.test("private keys are refused with a warning and never echoed", async (t) => {
  const privates: [string, string, string][] = [
    ["bitcoin", "live", bip84.rootpriv],
    ["bitcoin", "live", node("z", "m/84'/0'/0'").privateExtendedKey],
    ["bitcoin", "test", node("v", "m/84'/1'/0'").privateExtendedKey],
    ["bitcoin", "test", node("t", "m/84'/1'/0'").privateExtendedKey],
    ["bitcoin", "live", node("y", "m/49'/0'/0'").privateExtendedKey],
    ["ethereum", "live", node("x", "m/44'/60'/0'").privateExtendedKey],
    ["tron", "test", node("x", "m/44'/195'/0'").privateExtendedKey],
    ["polygon", "test", node("t", "m/44'/60'/0'").privateExtendedKey],
    ["base", "live", node("x", "m/44'/60'/0'").privateExtendedKey],
    ["arbitrum", "test", node("t", "m/44'/60'/0'").privateExtendedKey],
    ["solana", "live", node("x", "m/44'/501'/0'").privateExtendedKey],
  ];
  // A private key relabelled with public version bytes is still a private key.
  const payload = b58c.decode(node("x", "m/44'/60'/0'").privateExtendedKey);
  payload.set([0x04, 0x88, 0xb2, 0x1e], 0);
  privates.push(["ethereum", "live", b58c.encode(payload)]);
  // A private key with a typo fails its checksum, but it has still been shared.
  const typo = node("z", "m/84'/0'/0'").privateExtendedKey;
  privates.push(["bitcoin", "live", typo.slice(0, -1) + (typo.endsWith("a") ? "b" : "a")]);
  privates.push(["bitcoin", "live", "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about"]);
  privates.push(["ethereum", "live", "0x" + "1f".repeat(32)]);
  // WIF of a private key (compressed, mainnet and testnet).
  privates.push(["bitcoin", "live", b58c.encode(new Uint8Array([0x80, ...new Uint8Array(32).fill(0x11), 0x01]))]);
  privates.push(["bitcoin", "test", b58c.encode(new Uint8Array([0xef, ...new Uint8Array(32).fill(0x11), 0x01]))]);

  for (const [network, environment, key] of privates) {
    const error = refusal(() => parseAccountKey(network, environment as "test" | "live", `  ${key}\n`));
    t.match(error.message, /never/, `${network} ${environment} ${key.slice(0, 4)}… says never`);
    t.match(error.message, /private key/);
    t.notOk(error.message.includes(key), "the key is not in the message");
    t.notOk(error.message.includes(key.slice(4, 16)), "no fragment of the key is in the message");
    t.throws(() => deriveAddress(network, environment as "test" | "live", key, 0), SourceKeyError, "deriveAddress refuses too");
  }
});

t.test("the wrong kind of public key names what is expected", async (t) => {
  const cases: [string, "test" | "live", string, RegExp][] = [
    ["bitcoin", "live", testAccountKeys.bitcoin, /got a vpub.*zpub \(m\/84'\/0'\/0'\)/],
    ["bitcoin", "test", bip84.account0xpub, /got a zpub.*vpub \(m\/84'\/1'\/0'\)/],
    ["bitcoin", "live", bip44BitcoinXpub, /got a xpub.*zpub/],
    ["bitcoin", "live", bip49Ypub, /got a ypub.*zpub/],
    ["bitcoin", "test", node("t", "m/84'/1'/0'").publicExtendedKey, /got a tpub.*vpub/],
    ["ethereum", "live", bip84.account0xpub, /got a zpub.*xpub \(m\/44'\/60'\/0'\)/],
    ["ethereum", "test", node("t", "m/44'/60'/0'").publicExtendedKey, /got a tpub.*xpub/],
    ["tron", "live", bip84.account0xpub, /got a zpub.*xpub \(m\/44'\/195'\/0'\)/],
  ];
  for (const [network, environment, key, message] of cases) {
    const error = refusal(() => parseAccountKey(network, environment, key));
    t.match(error.message, message, `${network} ${environment} ${key.slice(0, 4)}`);
    t.notOk(error.message.includes(key), "the key is not echoed");
  }
});

t.test("only account-level keys (depth 3, hardened) are accepted", async (t) => {
  for (const [key, depth] of [
    [bip84.rootpub, 0],
    [node("z", "m/84'/0'").publicExtendedKey, 2],
    [node("z", "m/84'/0'/0'/0").publicExtendedKey, 4],
    [node("z", "m/84'/0'/0").publicExtendedKey, 3],
  ] as const) {
    const error = refusal(() => parseAccountKey("bitcoin", "live", key));
    t.match(error.message, new RegExp(`depth ${depth}.*account's extended public key \\(m/84'/0'/0'\\)`), `depth ${depth}`);
  }
  t.match(refusal(() => parseAccountKey("ethereum", "live", node("x", "m/44'/60'/0'/0").publicExtendedKey)).message, /m\/44'\/60'\/0'/);
});

t.test("garbage and checksum failures", async (t) => {
  const key = bip84.account0xpub;
  const flipped = key.slice(0, 40) + (key[40] === "a" ? "b" : "a") + key.slice(41);
  for (const bad of [flipped, key.slice(0, -1), key + "1", "zpub", "", "   ", "hello world", "0x9858EfFD232B4033E47d90003D41EC34EcaEda94"]) {
    const error = refusal(() => parseAccountKey("bitcoin", "live", bad));
    t.match(error.message, /not a valid extended public key|not an extended public key/, JSON.stringify(bad.slice(0, 12)));
    if (bad.trim().length > 20) t.notOk(error.message.includes(bad.trim()), "not echoed");
  }
  t.match(refusal(() => parseAccountKey("bitcoin", "live", flipped)).message, /\(checksum\)/);
});

t.test("solana and unknown networks have no account keys", async (t) => {
  t.equal(supportsAccountKey("solana"), false);
  t.equal(supportsAccountKey("dogecoin"), false);
  for (const network of ["bitcoin", "ethereum", "polygon", "base", "arbitrum", "tron"]) t.equal(supportsAccountKey(network), true, network);
  t.match(refusal(() => parseAccountKey("solana", "live", testAccountKeys.ethereum)).message, /solana takes an imported address pool/);
  t.throws(() => deriveAddress("solana", "test", testAccountKeys.ethereum, 0), SourceKeyError);
  t.throws(() => parseAccountKey("dogecoin", "live", testAccountKeys.ethereum), SourceKeyError);
});

t.test("deriveAddress index bounds", async (t) => {
  for (const index of [-1, 2 ** 31, 2 ** 32, 1.5, Number.NaN, Infinity]) {
    t.throws(() => deriveAddress("bitcoin", "live", bip84.account0xpub, index), RangeError, `index ${index}`);
    t.throws(() => testSolanaAddress(index), RangeError, `solana index ${index}`);
  }
  t.ok(deriveAddress("bitcoin", "live", bip84.account0xpub, 2 ** 31 - 1).startsWith("bc1q"), "2^31 - 1 is the last index");
});

t.test("testSolanaAddress is the documented synthetic address", async (t) => {
  t.equal(testSolanaAddress(0), "44TYGq2LziZvrrdMDVCAQ4FRXH6qECS7bs6FsAjMrtva");
  t.not(testSolanaAddress(1), testSolanaAddress(0));
  for (const index of [0, 1, 99]) t.same(checkAddress("solana", "test", testSolanaAddress(index)), { ok: true, address: testSolanaAddress(index) });
});

t.test("the derivation agrees with @scure/bip32's deriveChild for random account keys and indices", async (t) => {
  let runs = 0;
  fc.assert(
    fc.property(fc.uint8Array({ minLength: 32, maxLength: 32 }), fc.integer({ min: 0, max: 2 ** 31 - 1 }), (seed, index) => {
      const account = HDKey.fromMasterSeed(seed).derive("m/44'/60'/0'");
      const expected = account.deriveChild(0).deriveChild(index).publicKey as Uint8Array;
      const evm = toEip55(keccak_256(secp256k1.Point.fromBytes(expected).toBytes(false).subarray(1)).subarray(12));
      assert.equal(deriveAddress("ethereum", "live", account.publicExtendedKey, index), evm);
      const tron = b58c.encode(new Uint8Array([0x41, ...keccak_256(secp256k1.Point.fromBytes(expected).toBytes(false).subarray(1)).subarray(12)]));
      assert.equal(deriveAddress("tron", "live", account.publicExtendedKey, index), tron);
      runs++;
    }),
    { numRuns: 200 },
  );
  t.equal(runs, 200, "200 random keys and indices agree");
});

t.test("a batch derives what one-by-one derivation does, in the form checkAddress keeps", async (t) => {
  let runs = 0;
  fc.assert(
    fc.property(
      fc.uint8Array({ minLength: 32, maxLength: 32 }),
      fc.constantFrom("bitcoin", "ethereum", "tron"),
      fc.array(fc.integer({ min: 0, max: 2 ** 31 - 1 }), { minLength: 1, maxLength: 12 }),
      (seed, network, indices) => {
        const [versions, path] = network === "bitcoin" ? (["z", "m/84'/0'/0'"] as const) : (["x", "m/44'/60'/0'"] as const);
        const key = HDKey.fromMasterSeed(seed, v[versions]).derive(path).publicExtendedKey;
        const batch = deriveAddresses(network, "live", key, indices);
        assert.deepEqual(batch, indices.map((i) => deriveAddress(network, "live", key, i)));
        // What the payment URI's check would turn them into: themselves (so remembering them skips nothing).
        for (const address of batch) assert.deepEqual(checkAddress(network, "live", address), { ok: true, address });
        runs++;
      },
    ),
    { numRuns: 60 },
  );
  t.equal(runs, 60);
  t.same(builtinAddresses("ethereum", [0, 1]).slice(0, 1), ["0x9858EfFD232B4033E47d90003D41EC34EcaEda94"], "the built-in key's batch starts at the published address");
  t.same(builtinAddresses("solana", [3, 4]), [testSolanaAddress(3), testSolanaAddress(4)]);
  t.throws(() => deriveAddresses("ethereum", "live", testAccountKeys.ethereum, [0, -1]), RangeError, "one bad index refuses the batch");
});
