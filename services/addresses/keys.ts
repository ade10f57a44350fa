/**
 * Watch-only address derivation. The merchant gives us the extended PUBLIC key
 * of one wallet account; we derive its receive addresses (m/…/account'/0/i),
 * the same ones Sparrow, Electrum or MetaMask show. The server never holds a
 * private key, so anything private is refused before it is parsed further.
 */
import { HDKey, type Versions } from "@scure/bip32";
import { createHmac } from "node:crypto";
import { secp256k1 } from "@noble/curves/secp256k1.js";
import type { WeierstrassPoint } from "@noble/curves/abstract/weierstrass.js";
import { normalizeZ } from "@noble/curves/abstract/curve.js";
import { base58, bech32 } from "@scure/base";
import { sha256 } from "@noble/hashes/sha2.js";
import { keccak_256 } from "@noble/hashes/sha3.js";
import { ripemd160 } from "@noble/hashes/legacy.js";
import { utf8ToBytes } from "@noble/hashes/utils.js";
import { base58check, toEip55, tronPrefix, type Environment } from "./formats.ts";
import { setBounded } from "../platform/bounded.ts";
import { isEvmNetwork, type EvmNetwork } from "../vocabulary/assets.ts";
import { BaseTable } from "./base-table.ts";

/** A refusal whose message is safe to show the merchant: it never contains the key. */
export class SourceKeyError extends Error {
  override name = "SourceKeyError";
}

type KeyKind = "xpub" | "zpub" | "vpub";

// SLIP-132 version bytes; the private half is what HDKey would accept for the matching xprv/zprv/vprv.
const versions: Record<KeyKind, Versions> = {
  xpub: { private: 0x0488ade4, public: 0x0488b21e },
  zpub: { private: 0x04b2430c, public: 0x04b24746 },
  vpub: { private: 0x045f18bc, public: 0x045f1cf6 },
};

// Every SLIP-132 private version: xprv yprv zprv Yprv Zprv tprv uprv vprv Uprv Vprv.
const privateVersions = new Set([
  0x0488ade4, 0x049d7878, 0x04b2430c, 0x0295b005, 0x02aa7a99, 0x04358394, 0x044a4e28, 0x045f18bc, 0x024285b5, 0x02575048,
]);

const publicVersionNames = new Map([
  [0x0488b21e, "xpub"],
  [0x049d7cb2, "ypub"],
  [0x04b24746, "zpub"],
  [0x0295b43f, "Ypub"],
  [0x02aa7ed3, "Zpub"],
  [0x043587cf, "tpub"],
  [0x044a5262, "upub"],
  [0x045f1cf6, "vpub"],
  [0x024289ef, "Upub"],
  [0x02575483, "Vpub"],
]);

function privateKeyRefusal(what: string): SourceKeyError {
  return new SourceKeyError(
    `${what}: never give a private key or seed phrase to anyone, including us. ` +
      "Send only the account's extended public key. If it was shared anywhere, treat the wallet as compromised and move its funds.",
  );
}

/**
 * EVM and tron wallets have no testnet key versions: MetaMask/Ledger export
 * the same m/44'/60'/0' xpub for Sepolia as for mainnet. A tpub is refused
 * there because it comes from a Bitcoin testnet wallet, i.e. the wrong coin.
 */
function expectedKind(network: string, environment: Environment): { kind: KeyKind; path: string } {
  switch (network) {
    case "bitcoin":
      return environment === "live" ? { kind: "zpub", path: "m/84'/0'/0'" } : { kind: "vpub", path: "m/84'/1'/0'" };
    case "ethereum":
    case "polygon":
    case "base":
    case "arbitrum":
      return { kind: "xpub", path: "m/44'/60'/0'" };
    case "tron":
      return { kind: "xpub", path: "m/44'/195'/0'" };
    case "solana":
      throw new SourceKeyError(
        "solana has no extended public key derivation (ed25519); solana takes an imported address pool (admin address import)",
      );
    default:
      throw new SourceKeyError(`extended public keys are not supported for network "${network}"`);
  }
}

export function supportsAccountKey(network: string): boolean {
  return network === "bitcoin" || isEvmNetwork(network) || network === "tron";
}

/** The key, trimmed, if it is an account-level extended public key of the right kind; else SourceKeyError. */
export function parseAccountKey(network: string, environment: Environment, key: string): string {
  return loadAccountKey(network, environment, key).text;
}

function loadAccountKey(network: string, environment: Environment, key: string): { text: string; hd: HDKey } {
  const text = key.trim();
  // Before anything else, even an unsupported network: a shared secret must be called out.
  refuseSecrets(text);
  const { kind, path } = expectedKind(network, environment);
  const expected = `${network} ${environment === "test" ? "test mode" : "live mode"} expects the account's ${kind} (${path})`;

  const payload = decodeBase58check(text);
  if (payload === undefined) throw new SourceKeyError(`not a valid extended public key (checksum); ${expected}`);
  if (payload.length !== 78) throw new SourceKeyError(`not a valid extended public key (length); ${expected}`);
  const version = readVersion(payload);
  const actual = publicVersionNames.get(version);
  if (actual !== kind) {
    throw new SourceKeyError(`${actual === undefined ? "this is not an extended public key" : `got a ${actual}`}; ${expected}`);
  }

  let hd: HDKey;
  try {
    hd = HDKey.fromExtendedKey(text, versions[kind]);
  } catch {
    throw new SourceKeyError(`not a valid extended public key (bad public key); ${expected}`);
  }
  // Account keys sit at m/purpose'/coin'/account': depth 3, reached by a hardened step.
  if (hd.depth !== 3 || hd.index < 0x80000000) {
    throw new SourceKeyError(
      `this key is at depth ${hd.depth}, not an account key; export the account's extended public key (${path}) from your wallet`,
    );
  }
  return { text, hd };
}

/**
 * Where an account key sits in its wallet: the master key's fingerprint and the hardened path to
 * the account, as a descriptor writes it (`[d34db33f/84'/0'/0']`). A hardware wallet signs a PSBT
 * input only when its BIP-32 derivation names this fingerprint and the full path, and the account
 * key alone cannot tell either (it carries its parent's fingerprint, not the master's).
 */
export interface KeyOrigin {
  /** The master key's fingerprint, 8 lowercase hex digits. */
  fingerprint: string;
  /** The account's path, e.g. "m/84'/0'/0'". */
  path: string;
}

/**
 * A key as Sparrow, Bitcoin Core or a descriptor exports it: `[fingerprint/84'/0'/0']zpub…` (h
 * for ' too), or the bare key. The origin's path must be the one the network expects; its
 * fingerprint is taken as given (only the wallet can prove it, by signing).
 */
export function splitKeyOrigin(network: string, environment: Environment, text: string): { key: string; origin: KeyOrigin | null } {
  const trimmed = text.trim();
  const match = /^\[([^\]]*)\](.*)$/s.exec(trimmed);
  if (!match) return { key: trimmed, origin: null };
  const [, inside = "", key = ""] = match;
  refuseSecrets(key.trim());
  const { path } = expectedKind(network, environment);
  const [fingerprint = "", ...steps] = inside.split("/");
  if (!/^[0-9a-fA-F]{8}$/.test(fingerprint)) {
    throw new SourceKeyError(`the key origin [${inside}] must start with the master key's fingerprint, 8 hex digits (as in [d34db33f/${path.slice(2)}])`);
  }
  const given = `m/${steps.map((s) => s.replace(/h$/, "'")).join("/")}`;
  if (given !== path) throw new SourceKeyError(`the key origin's path is ${given}; ${network} ${environment === "test" ? "test mode" : "live mode"} expects ${path}`);
  return { key: key.trim(), origin: { fingerprint: fingerprint.toLowerCase(), path } };
}

/** A key origin as stored and shown: "d34db33f/84'/0'/0'". */
export const originText = (o: KeyOrigin): string => `${o.fingerprint}/${o.path.slice(2)}`;

export function parseOriginText(text: string): KeyOrigin {
  const [fingerprint = "", ...steps] = text.split("/");
  return { fingerprint, path: `m/${steps.join("/")}` };
}

/** The compressed public key at …/0/index of the account key (what a PSBT input's derivation names). */
export function derivePublicKey(network: string, environment: Environment, key: string, index: number): Uint8Array {
  const [point] = childPoints(externalChain(network, environment, key), [index]);
  return (point as WeierstrassPoint<bigint>).toBytes(true);
}

/**
 * The account's change address at …/1/index and its public key: where a refund's PSBT returns
 * what it does not spend, as wallets do (BIP 44's internal chain). Not a deposit address, so no
 * watcher counts it as a payment. Rare, so @scure/bip32's own derivation does.
 */
export function deriveChange(network: string, environment: Environment, key: string, index: number): { address: string; publicKey: Uint8Array } {
  const publicKey = loadAccountKey(network, environment, key).hd.deriveChild(1).deriveChild(index).publicKey;
  if (publicKey === null) throw new Error("derived change key has no public key");
  return { address: encodeAddress(network, environment, secp256k1.Point.fromBytes(publicKey)), publicKey };
}

/**
 * Extended private keys of any version, and the other secrets that get pasted
 * into the same box: seed phrases, WIF and raw hex private keys.
 */
function refuseSecrets(text: string): void {
  const words = text.split(/\s+/);
  if (words.length >= 12 && words.every((w) => /^[a-z]+$/.test(w))) throw privateKeyRefusal("This looks like a seed phrase");
  if (/^(0x)?[0-9a-fA-F]{64}$/.test(text)) throw privateKeyRefusal("This looks like a raw private key");
  const payload = decodeBase58check(text);
  if (payload === undefined) {
    // A mistyped xprv fails its checksum but is still a private key that was just shared.
    if (/^[a-zA-Z]prv/.test(text)) throw privateKeyRefusal("This is a private key");
    return;
  }
  if (payload.length === 78 && (privateVersions.has(readVersion(payload)) || payload[45] === 0)) {
    throw privateKeyRefusal("This is a private key");
  }
  if ((payload.length === 33 || payload.length === 34) && (payload[0] === 0x80 || payload[0] === 0xef)) {
    throw privateKeyRefusal("This looks like a WIF private key");
  }
}

function decodeBase58check(text: string): Uint8Array | undefined {
  // An extended key is 111 characters; the cap keeps base58's quadratic decode cheap on pasted junk.
  if (text.length > 200) return undefined;
  try {
    return base58check.decode(text);
  } catch {
    return undefined;
  }
}

function readVersion(payload: Uint8Array): number {
  return new DataView(payload.buffer, payload.byteOffset, 4).getUint32(0, false);
}

const maxIndex = 2 ** 31;

/** The account's external chain (…/0): its public point kept decoded, for childPoints. */
interface Chain {
  hd: HDKey;
  point: WeierstrassPoint<bigint>;
  /** serP(K) ‖ ser32(i), i to be filled in: the HMAC input of a non-hardened child (BIP32 CKDpub). */
  template: Buffer;
  chainCode: Uint8Array;
}

/**
 * The account's external chain (…/0) by key: parsing a key and deriving the chain costs
 * two point operations, which every create would repeat. A few hundred keys stay in memory.
 */
const chains = new Map<string, Chain>();
const maxChains = 512;

function externalChain(network: string, environment: Environment, key: string): Chain {
  const id = `${network}|${environment}|${key}`;
  let chain = chains.get(id);
  if (!chain) {
    const hd = loadAccountKey(network, environment, key).hd.deriveChild(0);
    if (hd.publicKey === null || hd.chainCode === null) throw new Error("derived chain has no public key");
    const template = Buffer.alloc(37);
    template.set(hd.publicKey);
    chain = { hd, point: secp256k1.Point.fromBytes(hd.publicKey), template, chainCode: hd.chainCode };
    setBounded(chains, id, chain, maxChains);
  }
  return chain;
}

const curveOrder = secp256k1.Point.CURVE().n;

let baseTable: BaseTable | undefined;

/**
 * From now on child points multiply the base point with this comb table (see BaseTable): worth it
 * in a thread that derives thousands of addresses, not in every process.
 */
export function useBaseTable(table: BaseTable): void {
  baseTable ??= table;
}

/** IL of the child at `index`, or undefined if BIP32 calls that child invalid (IL ≥ n or 0). */
function childTweak(chain: Chain, index: number): bigint | undefined {
  const data = Buffer.from(chain.template);
  data.writeUInt32BE(index, 33);
  const I = createHmac("sha512", chain.chainCode).update(data).digest();
  const tweak = BigInt(`0x${I.toString("hex", 0, 32)}`);
  return tweak > 0n && tweak < curveOrder ? tweak : undefined;
}

/**
 * BIP32 CKDpub for a non-hardened child: K_i = K + IL·G, with IL the first half of
 * HMAC-SHA512(chain code, serP(K) ‖ ser32(i)). The same result as @scure/bip32's deriveChild
 * (the tests compare them, and against the BIPs' vectors), at under half its cost: that one
 * decodes the parent's compressed point on every call and multiplies in constant time, and an
 * EVM address decodes the child's point again. The scalar here comes from public key material
 * (an extended public key), so the variable-time multiplication has no secret to leak, and the
 * point is decoded once per chain. A create spends most of its CPU here otherwise.
 */
function childPoints(chain: Chain, indices: readonly number[]): WeierstrassPoint<bigint>[] {
  const P = secp256k1.Point;
  const tweaks = indices.map((index) => childTweak(chain, index));
  const sums = baseTable
    ? baseTable.multiplyMany(tweaks.map((t) => t ?? 0n), chain.point)
    : tweaks.map((t) => (t === undefined ? P.ZERO : chain.point.add(P.BASE.multiplyUnsafe(t))));
  // BIP32's "invalid child" (probability below 2^-127): @scure/bip32 says so, as it always has.
  const points = sums.map((p, n) => (tweaks[n] === undefined || p.is0() ? P.fromBytes(chain.hd.deriveChild(indices[n]!).publicKey as Uint8Array) : p));
  // One shared inversion instead of one each, which is a tenth of an address's cost.
  return normalizeZ(P, points);
}

/** The receive address at …/0/index of the account key (external chain, non-hardened). */
export function deriveAddress(network: string, environment: Environment, key: string, index: number): string {
  return deriveAddresses(network, environment, key, [index])[0] as string;
}

/** The receive addresses at …/0/i for each index, derived together (see childPoints). */
export function deriveAddresses(network: string, environment: Environment, key: string, indices: readonly number[]): string[] {
  for (const index of indices) {
    if (!Number.isInteger(index) || index < 0 || index >= maxIndex) {
      throw new RangeError(`address index must be an integer from 0 to ${maxIndex - 1}`);
    }
  }
  const chain = externalChain(network, environment, key);
  return childPoints(chain, indices).map((point) => encodeAddress(network, environment, point));
}

function encodeAddress(network: string, environment: Environment, point: WeierstrassPoint<bigint>): string {
  switch (network) {
    case "bitcoin": {
      const hash160 = ripemd160(sha256(point.toBytes(true)));
      return bech32.encode(environment === "live" ? "bc" : "tb", [0, ...bech32.toWords(hash160)]);
    }
    case "ethereum":
    case "polygon":
    case "base":
    case "arbitrum":
      return toEip55(evmAddressBytes(point));
    case "tron": {
      const payload = new Uint8Array(21);
      payload[0] = tronPrefix;
      payload.set(evmAddressBytes(point), 1);
      return base58check.encode(payload);
    }
    default:
      throw new SourceKeyError(`extended public keys are not supported for network "${network}"`);
  }
}

/** Ethereum and tron share this: the last 20 bytes of keccak256 of the uncompressed point (without 0x04). */
function evmAddressBytes(point: WeierstrassPoint<bigint>): Uint8Array {
  return keccak_256(point.toBytes(false).subarray(1)).subarray(12);
}

const evmTestKey = "xpub6DCoCpSuQZB2jawqnGMEPS63ePKWkwWPH4TU45Q7LPXWuNd8TMtVxRrgjtEshuqpK3mdhaWHPFsBngh5GFZaM6si3yZdUsT8ddYM3PwnATt";

/**
 * Built-in account keys for the Test environment, from the public BIP39 test
 * mnemonic "abandon … about". ANYONE CAN SPEND FROM THESE: testnet only,
 * never live. Only the public keys are here; the seed is not.
 */
export const testAccountKeys: Record<"bitcoin" | EvmNetwork | "tron", string> = {
  // m/84'/1'/0'
  bitcoin:
    "vpub5Y6cjg78GGuNLsaPhmYsiw4gYX3HoQiRBiSwDaBXKUafCt9bNwWQiitDk5VZ5BVxYnQdwoTyXSs2JHRPAgjAvtbBrf8ZhDYe2jWAqvZVnsc",
  // m/44'/60'/0': polygon, base and arbitrum are EVM chains, same path and addresses as ethereum
  ethereum: evmTestKey,
  polygon: evmTestKey,
  base: evmTestKey,
  arbitrum: evmTestKey,
  // m/44'/195'/0'
  tron: "xpub6D1AabNHCupeiLM65ZR9UStMhJ1vCpyV4XbZdyhMZBiJXALQtmn9p42VTQckoHVn8WNqS7dqnJokZHAHcHGoaQgmv8D45oNUKx6DZMNZBCd",
};

/** Where the built-in Test keys sit: the public test mnemonic's master key (73c5da0a) and each key's path. */
export const testKeyOrigins: Partial<Record<keyof typeof testAccountKeys, KeyOrigin>> = {
  bitcoin: { fingerprint: "73c5da0a", path: "m/84'/1'/0'" },
};

/** The built-in Test key's address at an index (Test mode only: anyone can spend from these keys). */
export function builtinAddress(network: string, index: number): string {
  return builtinAddresses(network, [index])[0] as string;
}

/** The built-in Test key's addresses at these indices, derived together (see deriveAddresses). */
export function builtinAddresses(network: string, indices: readonly number[]): string[] {
  if (network === "solana") return indices.map(testSolanaAddress);
  const key = testAccountKeys[network as keyof typeof testAccountKeys];
  if (!key) throw new SourceKeyError(`no built-in Test key for network "${network}"`);
  return deriveAddresses(network, "test", key, indices);
}

/**
 * Solana (ed25519) has no public-only derivation, so Test mode uses a
 * synthetic address: base58(sha256("payments-test-solana:" + index)). It is a
 * valid 32-byte address whose private key nobody knows: test payments to it are
 * simulated, never sent.
 */
export function testSolanaAddress(index: number): string {
  if (!Number.isInteger(index) || index < 0 || index >= maxIndex) {
    throw new RangeError(`address index must be an integer from 0 to ${maxIndex - 1}`);
  }
  return base58.encode(sha256(utf8ToBytes(`payments-test-solana:${index}`)));
}
