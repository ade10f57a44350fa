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
