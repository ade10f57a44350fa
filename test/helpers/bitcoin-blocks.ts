// Bitcoin blocks built from first principles for tests (node:crypto's SHA-256, not the watcher's
// code): a header's 80 bytes, its hash, a merkle root, and a nonce ground until the hash meets
// the target of its bits, so that a fake node serves blocks a real one would.
import { createHash } from "node:crypto";
import type { HeaderFields } from "../../services/watcher/bitcoin-checks.ts";

const sha256d = (b: Buffer): Buffer => createHash("sha256").update(createHash("sha256").update(b).digest()).digest();
/** RPC writes hashes byte-reversed. */
const le = (hex: string): Buffer => Buffer.from(hex, "hex").reverse();
const rpc = (b: Buffer): string => Buffer.from(b).reverse().toString("hex");

/** A header's fields as RPC writes them (the watcher's type; nothing of its code is used here). */
export type Header = Omit<HeaderFields, "hash" | "height">;

export function headerBytes(h: Header): Buffer {
  const out = Buffer.alloc(80);
  out.writeUInt32LE(h.version >>> 0, 0);
  le(h.previousblockhash ?? "00".repeat(32)).copy(out, 4);
  le(h.merkleroot).copy(out, 36);
  out.writeUInt32LE(h.time, 68);
  out.writeUInt32LE(Number.parseInt(h.bits, 16), 72);
  out.writeUInt32LE(h.nonce >>> 0, 76);
  return out;
}

export const hashOfHeader = (h: Header): string => rpc(sha256d(headerBytes(h)));

export function merkleRootOf(txids: readonly string[]): string {
  let level = txids.map(le);
  while (level.length > 1) {
    const next: Buffer[] = [];
    for (let i = 0; i < level.length; i += 2) next.push(sha256d(Buffer.concat([level[i] as Buffer, (level[i + 1] ?? level[i]) as Buffer])));
    level = next;
  }
  return rpc(level[0] as Buffer);
}

/** The target of compact bits with a positive mantissa and an exponent of at least 3 (the only kind tests mine at). */
export const targetOf = (bits: string): bigint => BigInt(Number.parseInt(bits.slice(2), 16)) << BigInt(8 * (Number.parseInt(bits.slice(0, 2), 16) - 3));

/** A CompactSize as Bitcoin writes it (little-endian, 0xfd/0xfe prefixes). */
function compactSize(n: number): Buffer {
  if (n < 0xfd) return Buffer.from([n]);
  if (n <= 0xffff) return Buffer.from([0xfd, n & 0xff, n >> 8]);
  const b = Buffer.alloc(5);
  b[0] = 0xfe;
  b.writeUInt32LE(n, 1);
  return b;
}

/**
 * A transaction of a test, described: the outputs it spends (none: a coinbase-like input, told
 * apart by `tag`) and what it pays (value in BTC, as RPC writes it; the script as hex).
 */
export interface FakeTx {
  tag?: number;
  vin?: { txid: string; vout: number; sequence?: number }[];
  vout: { value: number; scriptPubKey: { hex: string } }[];
  /** A sequence for the coinbase-like input (BIP 125's signal is below 0xfffffffe). */
  sequence?: number;
  lockTime?: number;
}

/** A transaction's bytes (the serialization without witness) and its txid, computed here. */
export function txBytes(t: FakeTx): { txid: string; hex: string; bytes: Buffer } {
  const parts: Buffer[] = [Buffer.from([1, 0, 0, 0])];
  const inputs = t.vin ?? [];
  if (inputs.length === 0) {
    const tag = Buffer.alloc(4);
    tag.writeUInt32LE((t.tag ?? 0) >>> 0);
    parts.push(compactSize(1), Buffer.alloc(32), Buffer.from([0xff, 0xff, 0xff, 0xff]), compactSize(tag.length), tag, u32(t.sequence ?? 0xffffffff));
  } else {
    parts.push(compactSize(inputs.length));
    for (const i of inputs) parts.push(le(i.txid), u32(i.vout), compactSize(0), u32(i.sequence ?? 0xffffffff));
  }
  parts.push(compactSize(t.vout.length));
  for (const o of t.vout) {
    const value = Buffer.alloc(8);
    value.writeBigUInt64LE(BigInt(Math.round(o.value * 1e8)));
    const script = Buffer.from(o.scriptPubKey.hex, "hex");
    parts.push(value, compactSize(script.length), script);
  }
  parts.push(u32(t.lockTime ?? 0));
  const bytes = Buffer.concat(parts);
  return { txid: rpc(sha256d(bytes)), hex: bytes.toString("hex"), bytes };
}

function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(n >>> 0);
  return b;
}

/**
 * A block mined for a test: its header's nonce ground until its hash meets its bits (regtest's
 * 207fffff: one try in two), its transactions' bytes after it, as `getblock <hash> 0` serves it
 * (`hex`). `tx` has each transaction's txid (computed from its bytes) beside what described it.
 */
export function mine(o: { height: number; previousblockhash?: string; time: number; bits?: string; version?: number; tx: FakeTx[] }) {
  const tx = o.tx.map((t) => ({ ...t, ...txBytes(t) }));
  const header: Header = { version: o.version ?? 0x20000000, previousblockhash: o.previousblockhash, merkleroot: merkleRootOf(tx.map((t) => t.txid)), time: o.time, bits: o.bits ?? "207fffff", nonce: 0 };
  const target = targetOf(header.bits);
  while (BigInt(`0x${hashOfHeader(header)}`) > target) header.nonce++;
  const hex = Buffer.concat([headerBytes(header), compactSize(tx.length), ...tx.map((t) => t.bytes)]).toString("hex");
  return { ...header, previousblockhash: o.previousblockhash, hash: hashOfHeader(header), height: o.height, tx, hex };
}

export type MinedBlock = ReturnType<typeof mine>;

/** A block's bytes as hex with a header of other fields (a lie: its transactions kept). */
export function withHeader(b: MinedBlock, h: Header): string {
  return headerBytes(h).toString("hex") + b.hex.slice(160);
}
