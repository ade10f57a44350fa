/**
 * Address formats per network: a payment address is checked for format AND
 * checksum before it is stored or shown, because a typo here sends a
 * customer's money somewhere nobody can spend it. Pure, never throws.
 */
import { base58, bech32, bech32m, createBase58check } from "@scure/base";
import { sha256 } from "@noble/hashes/sha2.js";
import { keccak_256 } from "@noble/hashes/sha3.js";
import { bytesToHex, utf8ToBytes } from "@noble/hashes/utils.js";
import type { Environment } from "../auth/keys.ts";

export type { Environment };

export type AddressCheck = { ok: true; address: string } | { ok: false; reason: string };

export const base58check = createBase58check(sha256);

// Longest real address is 74 (bech32 v0, 32-byte program); the cap keeps base58's quadratic decode cheap on garbage.
const maxAddressLength = 100;

export function checkAddress(network: string, environment: Environment, address: string): AddressCheck {
  const trimmed = address.trim();
  if (trimmed === "") return { ok: false, reason: "is empty" };
  if (trimmed.length > maxAddressLength) return { ok: false, reason: "is too long to be an address" };
  switch (network) {
    case "bitcoin":
      return checkBitcoin(environment, trimmed);
    case "ethereum":
    case "polygon":
    case "base":
    case "arbitrum":
      return checkEvm(network, trimmed);
    case "tron":
      return checkTron(trimmed);
    case "solana":
      return checkSolana(trimmed);
    default:
      return { ok: false, reason: `is for an unsupported network "${network}"` };
  }
}

const bitcoinParams = {
  live: { hrp: "bc", p2pkh: 0x00, p2sh: 0x05, label: "bitcoin", expected: "bc1…, 1… or 3…" },
  test: { hrp: "tb", p2pkh: 0x6f, p2sh: 0xc4, label: "bitcoin testnet", expected: "tb1…, m…, n… or 2…" },
} as const;

function checkBitcoin(environment: Environment, address: string): AddressCheck {
  const params = bitcoinParams[environment];
  const other = bitcoinParams[environment === "live" ? "test" : "live"];
  const invalid: AddressCheck = { ok: false, reason: `is not a valid ${params.label} address (expected ${params.expected})` };
  const wrongEnvironment: AddressCheck = {
    ok: false,
    reason: `is a ${other.label} address; ${environment} mode needs a ${params.label} address (${params.expected})`,
  };

  const separator = address.lastIndexOf("1");
  const hrp = address.slice(0, Math.max(separator, 0)).toLowerCase();
  if (hrp === params.hrp || hrp === other.hrp) {
    const program = decodeSegwit(address);
    if (program === undefined) return invalid;
    return hrp === params.hrp ? { ok: true, address: address.toLowerCase() } : wrongEnvironment;
  }

  const payload = tryDecode(() => base58check.decode(address));
  if (payload === undefined || payload.length !== 21) return invalid;
  if (payload[0] === params.p2pkh || payload[0] === params.p2sh) return { ok: true, address };
  if (payload[0] === other.p2pkh || payload[0] === other.p2sh) return wrongEnvironment;
  return invalid;
}

/**
 * The output script (scriptPubKey) an address stands for, in hex; undefined for anything that is
 * not a valid bitcoin address of either environment. A chain watcher matches outputs by it: the
 * same script is written bc1…, tb1… or bcrt1… depending on the network, and a script is not.
 */
export function bitcoinScript(address: string): string | undefined {
  const separator = address.lastIndexOf("1");
  const hrp = address.slice(0, Math.max(separator, 0)).toLowerCase();
  if (hrp === bitcoinParams.live.hrp || hrp === bitcoinParams.test.hrp) {
    const decoded = decodeSegwit(address);
    if (decoded === undefined) return undefined;
    // OP_0 or OP_1, then a push of the program.
    const opVersion = decoded.version === 0 ? "00" : "51";
    return opVersion + decoded.program.length.toString(16).padStart(2, "0") + bytesToHex(decoded.program);
  }
  const payload = tryDecode(() => base58check.decode(address));
  if (payload === undefined || payload.length !== 21) return undefined;
  const hash = bytesToHex(payload.subarray(1));
  const version = payload[0];
  if (version === bitcoinParams.live.p2pkh || version === bitcoinParams.test.p2pkh) return `76a914${hash}88ac`;
  if (version === bitcoinParams.live.p2sh || version === bitcoinParams.test.p2sh) return `a914${hash}87`;
  return undefined;
}

/**
 * BIP 173/350: v0 is bech32 with a 20- or 32-byte program, v1 is bech32m with
 * a 32-byte (taproot) program. Versions 2–16 are refused on purpose: nothing
 * can spend from them yet, so coins sent there are anyone's.
 */
function decodeSegwit(address: string): { version: number; program: Uint8Array } | undefined {
  for (const coder of [bech32, bech32m]) {
    const decoded = tryDecode(() => coder.decode(address as `${string}1${string}`, 90));
    const version = decoded?.words[0];
    if (decoded === undefined || version === undefined) continue;
    if ((version === 0) !== (coder === bech32)) return undefined;
    const program = tryDecode(() => coder.fromWords(decoded.words.slice(1)));
    if (program === undefined) return undefined;
    if (version === 0 && (program.length === 20 || program.length === 32)) return { version, program };
    if (version === 1 && program.length === 32) return { version, program };
    return undefined;
  }
  return undefined;
}

const evmPattern = /^0x[0-9a-fA-F]{40}$/;

function checkEvm(network: string, address: string): AddressCheck {
  if (!evmPattern.test(address)) {
    return { ok: false, reason: `is not a valid ${network} address (expected 0x and 40 hex digits)` };
  }
  const digits = address.slice(2);
  const checksummed = toEip55(digits);
  const uniformCase = digits === digits.toLowerCase() || digits === digits.toUpperCase();
  if (!uniformCase && checksummed !== address) {
    return { ok: false, reason: `is not a valid ${network} address (mixed-case checksum does not match; check for a typo)` };
  }
  if (/^0+$/.test(digits)) return { ok: false, reason: "is the zero address; funds sent there are burned" };
  return { ok: true, address: checksummed };
}

/** EIP-55: the case of each hex letter is a checksum bit taken from keccak256 of the lowercase hex. */
export function toEip55(address: Uint8Array | string): string {
  const lower = (typeof address === "string" ? address.replace(/^0x/i, "") : bytesToHex(address)).toLowerCase();
  const known = eip55Known.get(lower);
  if (known !== undefined) return known;
  if (!/^[0-9a-f]{40}$/.test(lower)) throw new TypeError("toEip55 expects 20 bytes");
  const hash = bytesToHex(keccak_256(utf8ToBytes(lower)));
  let out = "0x";
  for (let i = 0; i < 40; i++) {
    const c = lower[i] as string;
    out += parseInt(hash[i] as string, 16) >= 8 ? c.toUpperCase() : c;
  }
  // A report's outputs are checked, then shown in each event of their intents (address and
  // payment URI): one hash each, not one per use. Bounded; emptied when full.
  if (eip55Known.size >= eip55KnownMax) eip55Known.clear();
  eip55Known.set(lower, out);
  return out;
}
const eip55Known = new Map<string, string>();
const eip55KnownMax = 50_000;

export const tronPrefix = 0x41;

// Tron has one address format; Nile/Shasta testnets use the same "T…" addresses as mainnet.
function checkTron(address: string): AddressCheck {
  const payload = tryDecode(() => base58check.decode(address));
  if (payload === undefined || payload.length !== 21 || payload[0] !== tronPrefix) {
    return { ok: false, reason: "is not a valid tron address (expected a base58check address starting with T)" };
  }
  return { ok: true, address };
}

/**
 * A tron address's 20 bytes as TRON's Ethereum-compatible JSON-RPC writes them (`0x` and 40 lowercase
 * hex digits: the base58check payload without its 0x41 prefix); undefined for anything that is not a
 * valid tron address. Log filters and log topics use this form; the API shows the `T…` one.
 */
export function tronToHex20(address: string): string | undefined {
  const payload = tryDecode(() => base58check.decode(address));
  if (payload === undefined || payload.length !== 21 || payload[0] !== tronPrefix) return undefined;
  return `0x${bytesToHex(payload.subarray(1))}`;
}

/** The `T…` address of 20 bytes written in hex (`0x` optional, either case, or with the 41 prefix); undefined for anything else. */
export function tronFromHex20(hex: string): string | undefined {
  const digits = hex.replace(/^0x/i, "").toLowerCase();
  const body = digits.length === 42 && digits.startsWith("41") ? digits.slice(2) : digits;
  if (!/^[0-9a-f]{40}$/.test(body)) return undefined;
  const payload = new Uint8Array(21);
  payload[0] = tronPrefix;
  for (let i = 0; i < 20; i++) payload[i + 1] = parseInt(body.slice(2 * i, 2 * i + 2), 16);
  return base58check.encode(payload);
}

// Solana addresses carry no checksum: all we can check is that they are 32 bytes of base58.
function checkSolana(address: string): AddressCheck {
  const bytes = tryDecode(() => base58.decode(address));
  if (bytes === undefined || bytes.length !== 32) {
    return { ok: false, reason: "is not a valid solana address (expected base58 of 32 bytes)" };
  }
  return { ok: true, address: base58.encode(bytes) };
}

function tryDecode<T>(decode: () => T): T | undefined {
  try {
    return decode();
  } catch {
    return undefined;
  }
}
