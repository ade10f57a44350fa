/**
 * A block header's logs bloom (Yellow Paper, M3:2048): 256 bytes in which each log's address and
 * each of its topics set three bits, chosen by the first three pairs of bytes of the item's
 * keccak256 (each pair's low 11 bits; bit 0 is the last byte's lowest bit). A bit clear means the
 * item is in no log of the block; all three set means it may be. viem has no helper for it.
 */
import { hexToBytes, keccak256, type Hex } from "viem";

export const bloomBytes = 256;

/** An item's three bits, numbered 0..2047 from the last byte's lowest bit. */
export type BloomBits = readonly [number, number, number];

export function bloomBits(item: Hex | Uint8Array): BloomBits {
  const h = keccak256(item, "bytes");
  const bit = (i: number) => (((h[i] as number) << 8) | (h[i + 1] as number)) & 0x7ff;
  return [bit(0), bit(2), bit(4)];
}

/** Whether bit `n` of a bloom is set. */
export function bloomBit(bloom: Uint8Array, n: number): boolean {
  return (((bloom[bloomBytes - 1 - (n >> 3)] as number) >> (n & 7)) & 1) === 1;
}

/** Whether all of an item's bits are set: it may be in the block's logs (false: it is in none). */
export function bloomHas(bloom: Uint8Array, bits: BloomBits): boolean {
  return bloomBit(bloom, bits[0]) && bloomBit(bloom, bits[1]) && bloomBit(bloom, bits[2]);
}

/** A node's `logsBloom` as bytes; undefined when it is not 256 bytes of hex (a node's answer is untrusted). */
export function parseBloom(hex: string | undefined): Uint8Array | undefined {
  if (hex === undefined || !/^0x[0-9a-fA-F]{512}$/.test(hex)) return undefined;
  return hexToBytes(hex as Hex);
}

/** The bloom of some logs: each one's address and topics. */
export function bloomOf(logs: readonly { address: string; topics: readonly string[] }[]): Uint8Array {
  const bloom = new Uint8Array(bloomBytes);
  for (const log of logs) {
    for (const item of [log.address, ...log.topics]) {
      for (const n of bloomBits(item as Hex)) {
        const i = bloomBytes - 1 - (n >> 3);
        bloom[i] = (bloom[i] as number) | (1 << (n & 7));
      }
    }
  }
  return bloom;
}

/** Whether every bit set in `inner` is set in `outer`. */
export function bloomCovers(outer: Uint8Array, inner: Uint8Array): boolean {
  return inner.every((byte, i) => (byte & (outer[i] as number)) === byte);
}

/** An address as an indexed event argument (a topic): left-padded to 32 bytes. */
export function addressTopic(address: string): Hex {
  return `0x${address.slice(2).toLowerCase().padStart(64, "0")}`;
}
