import net from "node:net";
import { createContextKey } from "@connectrpc/connect";

/** The address a call comes from (the client's, through trusted proxies), set by whichever transport received it. */
export const clientAddressKey = createContextKey<string>("unknown");

/**
 * The address a request comes from, for per-client limits. Behind a proxy every client shares
 * the proxy's address, so one of them could lock everyone out: a peer on the trusted list
 * (TRUSTED_PROXIES) is taken at its word in X-Forwarded-For, read from the right, skipping the
 * trusted hops; from any other peer the header is ignored, as anyone can write it.
 */
export class ClientAddresses {
  #trusted = new net.BlockList();

  /** `trusted`: addresses and CIDR ranges ("127.0.0.1", "10.0.0.0/8", "::1"). */
  constructor(trusted: readonly string[]) {
    for (const entry of trusted) {
      const [address = "", bits] = entry.split("/");
      const family = net.isIPv6(address) ? "ipv6" : "ipv4";
      if (bits === undefined) this.#trusted.addAddress(address, family);
      else this.#trusted.addSubnet(address, Number(bits), family);
    }
  }

  #isTrusted(address: string): boolean {
    const plain = unmapped(address);
    return net.isIP(plain) !== 0 && this.#trusted.check(plain, net.isIPv6(plain) ? "ipv6" : "ipv4");
  }

  /** The client's address, from the connection's peer and its X-Forwarded-For header (if any). */
  of(peer: string | undefined, forwardedFor: string | null | undefined): string {
    let address = unmapped(peer ?? "unknown");
    if (!forwardedFor || !this.#isTrusted(address)) return address;
    const hops = forwardedFor.split(",").map((h) => h.trim());
    while (hops.length > 0 && this.#isTrusted(address)) {
      const next = hops.pop() as string;
      if (net.isIP(unmapped(next)) === 0) break; // not an address: keep the last one we could trust
      address = unmapped(next);
    }
    return address;
  }
}

/** "::ffff:1.2.3.4" as "1.2.3.4": one client, one key. */
function unmapped(address: string): string {
  return address.startsWith("::ffff:") && net.isIPv4(address.slice(7)) ? address.slice(7) : address;
}

/** Checks a TRUSTED_PROXIES entry; the reason when it is not an address or CIDR range. */
export function checkTrustedProxy(entry: string): string | undefined {
  const [address = "", bits, extra] = entry.split("/");
  const version = net.isIP(address);
  if (version === 0 || extra !== undefined) return `"${entry}" is not an IP address or CIDR range`;
  if (bits !== undefined && !(/^\d+$/.test(bits) && Number(bits) <= (version === 4 ? 32 : 128))) return `"${entry}" has a bad prefix length`;
  return undefined;
}

/**
 * The client a per-address limit counts: an IPv4 address itself, an IPv6 address its /64. One
 * subscriber is given a whole /64 (RFC 6177), so counting each /128 would give one client 2^64
 * budgets.
 */
export function limitKeyOf(address: string): string {
  if (!net.isIPv6(address)) return address;
  const groups = expandedIPv6(address);
  return groups ? `${groups.slice(0, 4).join(":")}::/64` : address;
}

/** The eight 16-bit groups of an IPv6 address, as lowercase hex without leading zeros; undefined for a scoped or odd form. */
function expandedIPv6(address: string): string[] | undefined {
  if (address.includes("%")) address = address.slice(0, address.indexOf("%"));
  let tail: string[] = [];
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(address);
  if (v4?.[1]) {
    const [a = 0, b = 0, c = 0, d = 0] = v4[1].split(".").map(Number);
    tail = [((a << 8) | b).toString(16), ((c << 8) | d).toString(16)];
    address = address.slice(0, -v4[1].length) + "0:0";
  }
  const [head = "", rest] = address.split("::");
  const left = head === "" ? [] : head.split(":");
  const right = rest === undefined || rest === "" ? [] : rest.split(":");
  const missing = 8 - left.length - right.length;
  if (missing < 0 || (rest === undefined && missing !== 0)) return undefined;
  const groups = [...left, ...Array<string>(missing).fill("0"), ...right].map((g) => parseInt(g, 16).toString(16));
  if (tail.length === 2) groups.splice(6, 2, ...tail);
  return groups;
}
