import t from "tap";
import fc from "fast-check";
import { base58, bech32, bech32m, createBase58check } from "@scure/base";
import { sha256 } from "@noble/hashes/sha2.js";
import { hexToBytes } from "@noble/hashes/utils.js";
import { checkAddress, toEip55, tronFromHex20, tronToHex20 } from "../../services/addresses/formats.ts";
import { deriveAddress, testAccountKeys } from "../../services/addresses/keys.ts";
import { assets } from "../../services/vocabulary/assets.ts";

const b58c = createBase58check(sha256);
const environments = ["test", "live"] as const;
type Asserts = Pick<typeof t, "same" | "equal" | "match">;
const segwit = (hrp: string, version: number, program: Uint8Array, coder = version === 0 ? bech32 : bech32m) =>
  coder.encode(hrp, [version, ...coder.toWords(program)]);
const bytes = (n: number, fill = 0x5a) => new Uint8Array(n).fill(fill);
const base58checkOf = (...parts: number[][]) => b58c.encode(new Uint8Array(parts.flat()));

function accepts(t: Asserts, network: string, environment: "test" | "live", address: string, normalized = address) {
  t.same(checkAddress(network, environment, address), { ok: true, address: normalized }, `${network} ${environment} accepts ${address}`);
}
function refuses(t: Asserts, network: string, environment: "test" | "live", address: string, reason?: RegExp) {
  const result = checkAddress(network, environment, address);
  t.equal(result.ok, false, `${network} ${environment} refuses ${JSON.stringify(address)}`);
  if (!result.ok && reason) t.match(result.reason, reason);
}

t.test("bitcoin live", async (t) => {
  accepts(t, "bitcoin", "live", "bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu");
  accepts(t, "bitcoin", "live", "BC1QCR8TE4KR609GCAWUTMRZA0J4XV80JY8Z306FYU", "bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu");
  accepts(t, "bitcoin", "live", "  bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu\n", "bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu");
  accepts(t, "bitcoin", "live", "bc1qrp33g0q5c5txsp9arysrx4k6zdkfs4nce4xj0gdcccefvpysxf3qccfmv3"); // BIP173 P2WSH
  accepts(t, "bitcoin", "live", "bc1p5cyxnuxmeuwuvkwfem96lqzszd02n6xdcjrs20cac6yqjjwudpxqkedrcr"); // BIP86 taproot
  accepts(t, "bitcoin", "live", "1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa"); // P2PKH
  accepts(t, "bitcoin", "live", "3J98t1WpEZ73CNmQviecrnyiWrnqRhWNLy"); // P2SH

  refuses(t, "bitcoin", "live", "bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyv", /not a valid bitcoin address \(expected bc1…/);
  refuses(t, "bitcoin", "live", "bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fYu"); // mixed case
  refuses(t, "bitcoin", "live", "tb1q6rz28mcfaxtmd6v789l9rrlrusdprr9pqcpvkl", /bitcoin testnet address; live mode/);
  refuses(t, "bitcoin", "live", base58checkOf([0x6f], [...bytes(20)]), /testnet address; live mode/);
  refuses(t, "bitcoin", "live", segwit("bc", 0, bytes(21)), /not a valid/); // v0 must be 20 or 32 bytes
  refuses(t, "bitcoin", "live", segwit("bc", 0, bytes(20), bech32m)); // v0 with the v1 checksum
  refuses(t, "bitcoin", "live", segwit("bc", 1, bytes(32), bech32)); // v1 with the v0 checksum
  refuses(t, "bitcoin", "live", segwit("bc", 1, bytes(20))); // v1 is taproot: 32 bytes
  refuses(t, "bitcoin", "live", segwit("bc", 2, bytes(32))); // future versions: nobody can spend them yet
  refuses(t, "bitcoin", "live", base58checkOf([0x00], [...bytes(19)])); // 20-byte payload
  refuses(t, "bitcoin", "live", base58checkOf([0x30], [...bytes(20)])); // litecoin P2PKH
  refuses(t, "bitcoin", "live", "ltc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu");
  refuses(t, "bitcoin", "live", "1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNb"); // base58check checksum
  refuses(t, "bitcoin", "live", "");
  refuses(t, "bitcoin", "live", "bc1" + "q".repeat(200), /too long/);
});

t.test("bitcoin test", async (t) => {
  accepts(t, "bitcoin", "test", "tb1q6rz28mcfaxtmd6v789l9rrlrusdprr9pqcpvkl");
  accepts(t, "bitcoin", "test", "tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx"); // BIP173
  accepts(t, "bitcoin", "test", "TB1QW508D6QEJXTDG4Y5R3ZARVARY0C5XW7KXPJZSX", "tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx");
  accepts(t, "bitcoin", "test", segwit("tb", 1, bytes(32)));
  const p2pkh = base58checkOf([0x6f], [...bytes(20)]);
  const p2sh = base58checkOf([0xc4], [...bytes(20)]);
  accepts(t, "bitcoin", "test", p2pkh);
  accepts(t, "bitcoin", "test", p2sh);
  t.match(p2pkh, /^[mn]/, "testnet P2PKH starts with m or n");
  t.match(p2sh, /^2/, "testnet P2SH starts with 2");

  refuses(t, "bitcoin", "test", "bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu", /bitcoin address; test mode needs a bitcoin testnet address \(tb1…/);
  refuses(t, "bitcoin", "test", "1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa", /test mode/);
  refuses(t, "bitcoin", "test", "tb1q6rz28mcfaxtmd6v789l9rrlrusdprr9pqcpvkm", /is not a valid bitcoin testnet address \(expected tb1…/);
  refuses(t, "bitcoin", "test", "bcrt1qw508d6qejxtdg4y5r3zarvary0c5xw7kygt080"); // regtest
  refuses(t, "bitcoin", "test", segwit("tb", 0, bytes(33)));
});

t.test("ethereum, polygon, base and arbitrum", async (t) => {
  const checksummed = "0x9858EfFD232B4033E47d90003D41EC34EcaEda94";
  for (const network of ["ethereum", "polygon", "base", "arbitrum"]) {
    for (const environment of environments) {
      accepts(t, network, environment, checksummed);
      accepts(t, network, environment, checksummed.toLowerCase(), checksummed);
      accepts(t, network, environment, "0x" + checksummed.slice(2).toUpperCase(), checksummed);
      // EIP-55 spec vectors.
      for (const vector of [
        "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
        "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359",
        "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB",
        "0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb",
      ]) {
        accepts(t, network, environment, vector);
      }
      refuses(t, network, environment, "0x9858efFD232B4033E47d90003D41EC34EcaEda94", /mixed-case checksum/);
      refuses(t, network, environment, checksummed.slice(0, -1), new RegExp(`not a valid ${network} address \\(expected 0x`));
      refuses(t, network, environment, checksummed + "4");
      refuses(t, network, environment, checksummed.slice(2));
      refuses(t, network, environment, "0X" + checksummed.slice(2));
      refuses(t, network, environment, "0x9858EfFD232B4033E47d90003D41EC34EcaEda9g");
      refuses(t, network, environment, "0x" + "0".repeat(40), /zero address/);
    }
  }
  t.equal(toEip55("0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed"), "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed");
  t.equal(toEip55(hexToBytes("5aaeb6053f3e94c9b9a09f33669435e7ef1beaed")), "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed");
  t.throws(() => toEip55(new Uint8Array(19)), TypeError);
});

t.test("tron", async (t) => {
  for (const environment of environments) {
    accepts(t, "tron", environment, "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t");
    accepts(t, "tron", environment, "TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH");
    refuses(t, "tron", environment, "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6u", /not a valid tron address/);
    refuses(t, "tron", environment, base58checkOf([0x42], [...bytes(20)])); // not 0x41
    refuses(t, "tron", environment, base58checkOf([0x41], [...bytes(21)])); // 22 bytes
    refuses(t, "tron", environment, "1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa");
    refuses(t, "tron", environment, "41a614f803b6fd780986a42c78ec9c7f77e6ded13c"); // hex form
    refuses(t, "tron", environment, "0x9858EfFD232B4033E47d90003D41EC34EcaEda94");
  }
});

t.test("tron addresses in the 20-byte form TRON's JSON-RPC writes, and back", async (t) => {
  // Tether's USDT contract on mainnet, as Tronscan shows it in both forms.
  t.equal(tronToHex20("TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t"), "0xa614f803b6fd780986a42c78ec9c7f77e6ded13c");
  t.equal(tronFromHex20("0xa614f803b6fd780986a42c78ec9c7f77e6ded13c"), "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t");
  t.equal(tronFromHex20("0xA614F803B6FD780986A42C78EC9C7F77E6DED13C"), "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t", "either case (viem checksums log addresses)");
  t.equal(tronFromHex20("41a614f803b6fd780986a42c78ec9c7f77e6ded13c"), "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t", "the 21-byte form with 41");
  t.equal(tronToHex20("TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6u"), undefined, "a bad checksum");
  t.equal(tronToHex20("0xa614f803b6fd780986a42c78ec9c7f77e6ded13c"), undefined);
  t.equal(tronFromHex20("0xa614"), undefined);
  fc.assert(
    fc.property(fc.uint8Array({ minLength: 20, maxLength: 20 }), (b) => {
      const hex = `0x${Buffer.from(b).toString("hex")}`;
      const address = tronFromHex20(hex) as string;
      return checkAddress("tron", "live", address).ok && tronToHex20(address) === hex;
    }),
  );
});

t.test("solana", async (t) => {
  for (const environment of environments) {
    accepts(t, "solana", environment, "EPjFWdd5AufqSSqeM2qaxKEbt1M7cnjvn6k3K1qN9i8");
    accepts(t, "solana", environment, "11111111111111111111111111111111"); // 32 zero bytes (system program)
    accepts(t, "solana", environment, base58.encode(bytes(32, 0xff)));
    refuses(t, "solana", environment, base58.encode(bytes(31)), /expected base58 of 32 bytes/);
    refuses(t, "solana", environment, base58.encode(bytes(33)));
    refuses(t, "solana", environment, "EPjFWdd5AufqSSqeM2qaxKEbt1M7cnjvn6k3K1qN9i0"); // 0 is not base58
    refuses(t, "solana", environment, "EPjFWdd5AufqSSqeM2qaxKEbt1M7cnjvn6k3K1qN9iI");
  }
});

t.test("unknown networks are refused, not thrown", async (t) => {
  refuses(t, "dogecoin", "live", "1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa", /unsupported network/);
  refuses(t, "", "test", "0x9858EfFD232B4033E47d90003D41EC34EcaEda94");
});

t.test("every asset contract passes checkAddress for its network and environment", async (t) => {
  for (const asset of assets) {
    if (asset.contract === undefined) continue;
    for (const environment of environments) {
      const contract = asset.contract[environment];
      if (contract !== null) accepts(t, asset.network, environment, contract);
    }
  }
});

type Derivable = keyof typeof testAccountKeys;
const derivable: [Derivable, "test" | "live"][] = [
  ["bitcoin", "test"],
  ["ethereum", "test"],
  ["polygon", "live"],
  ["base", "test"],
  ["arbitrum", "live"],
  ["tron", "live"],
];
const index = fc.integer({ min: 0, max: 2 ** 31 - 1 });

t.test("property: every derived address passes checkAddress unchanged", async (t) => {
  fc.assert(
    fc.property(fc.constantFrom(...derivable), index, ([network, environment], i) => {
      const address = deriveAddress(network, environment, testAccountKeys[network], i);
      const result = checkAddress(network, environment, address);
      return result.ok && result.address === address;
    }),
    { numRuns: 200 },
  );
  t.pass("200 random indexes");
});

const bech32Chars = "qpzry9x8gf2tvdw0s3jn54khce6mua7l";
const base58Chars = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
const hexChars = "0123456789abcdefABCDEF";

t.test("property: one changed character is caught by the checksum", async (t) => {
  const mutation = fc.record({ target: fc.constantFrom(...derivable), i: index, position: fc.nat(), pick: fc.nat() });
  fc.assert(
    fc.property(mutation, ({ target: [network, environment], i, position, pick }) => {
      const original = deriveAddress(network, environment, testAccountKeys[network], i);
      const alphabet = network === "bitcoin" ? bech32Chars : network === "tron" ? base58Chars : hexChars;
      const start = network === "bitcoin" || network === "tron" ? 0 : 2;
      const at = start + (position % (original.length - start));
      const candidates = [...alphabet].filter((c) => c !== original[at]);
      const mutated = original.slice(0, at) + candidates[pick % candidates.length] + original.slice(at + 1);
      const result = checkAddress(network, environment, mutated);
      // bech32 detects any single substitution; base58check's 32-bit checksum all but surely does.
      if (network === "bitcoin" || network === "tron") return !result.ok;
      // EIP-55 only checksums letters' case: a changed digit is caught or gives a different address.
      return !result.ok || result.address !== original;
    }),
    { numRuns: 500 },
  );
  t.pass("500 single-character mutations");
});

t.test("property: flipping the case of one letter breaks EIP-55 and bech32 (or, EVM, drops the checksum to the same address)", async (t) => {
  fc.assert(
    fc.property(fc.constantFrom(...derivable), index, fc.nat(), ([network, environment], i, pick) => {
      if (network === "tron") return true; // base58 is case-sensitive data, covered above
      const original = deriveAddress(network, environment, testAccountKeys[network], i);
      const letters = [...original].flatMap((c, at) => (at > 1 && /[a-zA-Z]/.test(c) ? [at] : []));
      if (letters.length === 0) return true;
      const at = letters[pick % letters.length] as number;
      const c = original[at] as string;
      const flipped = original.slice(0, at) + (c === c.toLowerCase() ? c.toUpperCase() : c.toLowerCase()) + original.slice(at + 1);
      const result = checkAddress(network, environment, flipped);
      // Refused, unless the flip left every letter in one case: an EVM address written without its
      // EIP-55 checksum, which is accepted and normalizes back to the same address (seed 942497304).
      return !result.ok || (network !== "bitcoin" && result.address === original && /^0x([0-9a-f]+|[0-9A-F]+)$/.test(flipped));
    }),
    { numRuns: 300 },
  );
  t.pass("300 case flips");
});

t.test("property: checkAddress never throws", async (t) => {
  fc.assert(
    fc.property(fc.constantFrom("bitcoin", "ethereum", "polygon", "base", "arbitrum", "tron", "solana", "x"), fc.constantFrom(...environments), fc.string({ maxLength: 120 }), (network, environment, s) => {
      const result = checkAddress(network, environment, s);
      return typeof result.ok === "boolean";
    }),
    { numRuns: 1000 },
  );
  t.pass("1000 random strings");
});
