import { sha256 } from "@noble/hashes/sha2.js";
import { bytesToHex, hexToBytes } from "@noble/hashes/utils.js";

/**
 * What a block read from a bitcoin node is checked against before anything of it is believed:
 * its header hashes to the hash the node named and meets its own target (proof of work), its
 * merkle root is the one of the transactions read, and (mainnet) its target is the one the chain's
 * rules give it. Pure functions: bitcoin-source.ts calls them on every block it reads.
 */

/** The header fields of `getblock <hash> 2` (and `getblockheader <hash>`), as Bitcoin Core writes them. */
export interface HeaderFields {
  hash: string;
  height: number;
  /** Signed 32 bits as Core writes it (bcoin writes it unsigned): either serializes the same. */
  version: number;
  /** Absent (or null, bcoin) for block 0. */
  previousblockhash?: string | null;
  merkleroot: string;
  time: number;
  /** The compact target, 8 hex digits ("1d00ffff"). */
  bits: string;
  nonce: number;
}

import { BlockRefused } from "./block-refused.ts";

/** Mainnet's highest target (consensus.powLimit): difficulty 1. */
export const mainnetPowLimit = (1n << 224n) - 1n;
/** Blocks between retargets (nPowTargetTimespan / nPowTargetSpacing). */
export const retargetInterval = 2016;
/** Two weeks in seconds: the time a retarget period should take. */
const targetTimespan = 14 * 24 * 60 * 60;

const hash256 = (bytes: Uint8Array): Uint8Array => sha256(sha256(bytes));
const isHash = (s: unknown): s is string => typeof s === "string" && /^[0-9a-f]{64}$/i.test(s);
/** A hash as RPC writes it (big-endian hex) in the byte order it is hashed in (internal, little-endian). */
const internal = (hex: string): Uint8Array => hexToBytes(hex).reverse();
/** Hashed bytes as RPC writes the hash. */
const display = (bytes: Uint8Array): string => bytesToHex(Uint8Array.from(bytes).reverse());

/**
 * The target a compact `bits` stands for (arith_uint256::SetCompact): a 3-byte mantissa times
 * 256^(exponent - 3). A RangeError for what CheckProofOfWork refuses: the sign bit set with a
 * non-zero mantissa, a value past 256 bits, or zero.
 */
export function compactTarget(bits: number): bigint {
  if (!Number.isInteger(bits) || bits < 0 || bits > 0xffffffff) throw new RangeError(`bits ${bits} is not 32 bits`);
  const size = bits >>> 24;
  // As Core: the mantissa shifted first, its sign and overflow judged on what is left of it.
  const word = size <= 3 ? (bits & 0x007fffff) >>> (8 * (3 - size)) : bits & 0x007fffff;
  if (word !== 0 && (bits & 0x00800000) !== 0) throw new RangeError(`bits ${hex8(bits)} is negative`);
  if (word !== 0 && (size > 34 || (word > 0xff && size > 33) || (word > 0xffff && size > 32))) throw new RangeError(`bits ${hex8(bits)} overflows 256 bits`);
  const target = size <= 3 ? BigInt(word) : BigInt(word) << BigInt(8 * (size - 3));
  if (target === 0n) throw new RangeError(`bits ${hex8(bits)} is a zero target`);
  return target;
}

/** A target as compact bits (arith_uint256::GetCompact), as a retarget writes it. */
export function toCompact(target: bigint): number {
  let size = target === 0n ? 0 : Math.ceil(target.toString(2).length / 8);
  let word = size <= 3 ? Number(target << BigInt(8 * (3 - size))) : Number(target >> BigInt(8 * (size - 3)));
  // The mantissa's top bit is the sign: shift it out into one more byte of exponent.
  if (word & 0x00800000) {
    word >>>= 8;
    size++;
  }
  return ((size << 24) | word) >>> 0;
}

const hex8 = (bits: number): string => bits.toString(16).padStart(8, "0");

/** Bits as Core writes them ("1d00ffff") as a number; undefined when they are not 8 hex digits. */
export function parseBits(bits: unknown): number | undefined {
  return typeof bits === "string" && /^[0-9a-f]{8}$/i.test(bits) ? Number.parseInt(bits, 16) : undefined;
}

/** The 80 bytes of a block header: version, previous hash, merkle root, time, bits, nonce, little-endian. */
export function serializeHeader(h: Omit<HeaderFields, "hash" | "height">): Uint8Array {
  const bits = parseBits(h.bits);
  if (bits === undefined) throw new RangeError(`bits ${JSON.stringify(h.bits)} is not 8 hex digits`);
  const prev = h.previousblockhash ?? "0".repeat(64);
  if (!isHash(prev)) throw new RangeError("previousblockhash is not a 32-byte hash");
  if (!isHash(h.merkleroot)) throw new RangeError("merkleroot is not a 32-byte hash");
  for (const [name, v] of [["version", h.version], ["time", h.time], ["nonce", h.nonce]] as const) {
    if (!Number.isInteger(v) || v < -0x80000000 || v > 0xffffffff) throw new RangeError(`${name} ${v} is not 32 bits`);
  }
  const out = new Uint8Array(80);
  const view = new DataView(out.buffer);
  view.setUint32(0, h.version >>> 0, true);
  out.set(internal(prev), 4);
  out.set(internal(h.merkleroot), 36);
  view.setUint32(68, h.time >>> 0, true);
  view.setUint32(72, bits, true);
  view.setUint32(76, h.nonce >>> 0, true);
  return out;
}

/** The block hash of a header (double SHA-256 of its 80 bytes), as RPC writes it. */
export function headerHash(h: Omit<HeaderFields, "hash" | "height">): string {
  return display(hash256(serializeHeader(h)));
}

/** The merkle root of transactions by their txids (as RPC writes them): pairs hashed up, an odd last one paired with itself. */
export function merkleRoot(txids: readonly string[]): string {
  if (txids.length === 0) throw new RangeError("a block has at least its coinbase");
  let level = txids.map((id) => {
    if (!isHash(id)) throw new RangeError(`txid ${JSON.stringify(id)} is not a 32-byte hash`);
    return internal(id);
  });
  while (level.length > 1) {
    const next: Uint8Array[] = [];
    for (let i = 0; i < level.length; i += 2) {
      const left = level[i] as Uint8Array;
      const right = level[i + 1] ?? left;
      const pair = new Uint8Array(64);
      pair.set(left, 0);
      pair.set(right, 32);
      next.push(hash256(pair));
    }
    level = next;
  }
  return display(level[0] as Uint8Array);
}

/** The header's own checks: the fields hash to the hash named, and that hash meets the target its bits give (at most `powLimit`). */
export function checkHeader(h: HeaderFields, powLimit: bigint = (1n << 256n) - 1n): void {
  let computed: string;
  try {
    computed = headerHash(h);
  } catch (err) {
    throw new BlockRefused("header", h, (err as Error).message);
  }
  if (computed !== String(h.hash).toLowerCase()) throw new BlockRefused("header", h, `its header fields hash to ${computed}, not the hash the node named`);
  checkProofOfWork(h, parseBits(h.bits) as number, powLimit);
}

/** CheckProofOfWork: `bits` expand to a target (at most `powLimit`) that the block's hash meets. */
export function checkProofOfWork(b: { height: number; hash: string }, bits: number, powLimit: bigint = (1n << 256n) - 1n): void {
  let target: bigint;
  try {
    target = compactTarget(bits);
  } catch (err) {
    throw new BlockRefused("proof_of_work", b, (err as Error).message);
  }
  if (target > powLimit) throw new BlockRefused("proof_of_work", b, `bits ${hex8(bits)} is an easier target than the network allows`);
  if (BigInt(`0x${b.hash}`) > target) throw new BlockRefused("proof_of_work", b, `its hash is above the target of bits ${hex8(bits)}`);
}

/**
 * The block's transactions are the ones its header commits to: no txid twice (two identical
 * last ones of a level give the same root as one: CVE-2012-2459), and their merkle root is the
 * header's.
 */
export function checkTransactions(b: { height: number; hash: string; merkleroot: string; tx: readonly { txid: string }[] }): void {
  const txids = b.tx.map((t) => String(t.txid).toLowerCase());
  if (new Set(txids).size !== txids.length) throw new BlockRefused("duplicate_tx", b, "a txid appears twice in the block");
  let root: string;
  try {
    root = merkleRoot(txids);
  } catch (err) {
    throw new BlockRefused("merkle_root", b, (err as Error).message);
  }
  if (root !== String(b.merkleroot).toLowerCase()) throw new BlockRefused("merkle_root", b, `its transactions' merkle root is ${root}, not the header's ${b.merkleroot}`);
}

/**
 * The bits mainnet's rules give the block after `parent` (GetNextWorkRequired): the parent's,
 * but at a retarget height (a multiple of 2016), the parent's target scaled by how long the
 * period took (`periodStart`: the time of the block 2016 below the new one), clamped to 4× either
 * way, at most powLimit.
 */
export function mainnetNextBits(height: number, parent: { bits: number; time: number }, periodStart?: number): number {
  if (height % retargetInterval !== 0) return parent.bits;
  if (periodStart === undefined) throw new RangeError(`block ${height} retargets: the time of block ${height - retargetInterval} is needed`);
  const timespan = Math.min(Math.max(parent.time - periodStart, targetTimespan / 4), targetTimespan * 4);
  let target = (compactTarget(parent.bits) * BigInt(timespan)) / BigInt(targetTimespan);
  if (target > mainnetPowLimit) target = mainnetPowLimit;
  return toCompact(target);
}
