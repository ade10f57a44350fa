/**
 * A block header's logs bloom (Yellow Paper, M3:2048): 256 bytes in which each log's address and
 * each of its topics set three bits, chosen by the first three pairs of bytes of the item's
 * keccak256 (each pair's low 11 bits; bit 0 is the last byte's lowest bit). A bit clear means the
 * item is in no log of the block; all three set means it may be. viem has no helper for it.
 */
import { hexToBytes, keccak256, type Hex } from "viem";

export const bloomBytes = 256;

/** Where an item's three bits sit: byte index and mask, three times. */
export type BloomBits = readonly (readonly [number, number])[];

export function bloomBits(item: Hex | Uint8Array): BloomBits {
  const h = hexToBytes(keccak256(item));
  const bits: [number, number][] = [];
  for (let i = 0; i < 6; i += 2) {
    const bit = (((h[i] as number) << 8) | (h[i + 1] as number)) & 0x7ff;
    bits.push([bloomBytes - 1 - (bit >> 3), 1 << (bit & 7)]);
  }
  return bits;
}

/** Whether all of an item's bits are set: it may be in the block's logs (false: it is in none). */
export function bloomHas(bloom: Uint8Array, bits: BloomBits): boolean {
  return bits.every(([i, mask]) => ((bloom[i] as number) & mask) !== 0);
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
      for (const [i, mask] of bloomBits(item as Hex)) bloom[i] = (bloom[i] as number) | mask;
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
