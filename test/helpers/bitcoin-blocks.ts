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

/** A block's header fields and hash with its nonce ground to meet its bits (regtest's 207fffff: one try in two). */
export function mine<T extends { txid: string }>(o: { height: number; previousblockhash?: string; time: number; bits?: string; version?: number; tx: T[] }) {
  const header: Header = { version: o.version ?? 0x20000000, previousblockhash: o.previousblockhash, merkleroot: merkleRootOf(o.tx.map((t) => t.txid)), time: o.time, bits: o.bits ?? "207fffff", nonce: 0 };
  const target = targetOf(header.bits);
  while (BigInt(`0x${hashOfHeader(header)}`) > target) header.nonce++;
  return { ...header, previousblockhash: o.previousblockhash, hash: hashOfHeader(header), height: o.height, tx: o.tx };
}
