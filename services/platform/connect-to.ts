// WEBHOOK_CONNECT_TO (a test-only override of where webhook deliveries connect): a setting, so it
// is parsed with the rest of the configuration; delivery applies it (delivery/url-policy.ts).
import { isIP } from "node:net";

/** IPv6 hostnames from `URL` keep their brackets; sockets and DNS want them without. */
export function unbracket(hostname: string): string {
  return hostname.startsWith("[") && hostname.endsWith("]") ? hostname.slice(1, -1) : hostname;
}

export interface ConnectTo {
  host: string;
  port: number;
  toHost: string;
  toPort: number;
}

const connectToExample = "hooks.example.test:443:127.0.0.1:40123";

function connectToError(message: string): Error {
  return new Error(`WEBHOOK_CONNECT_TO: ${message} (expected comma-separated HOST1:PORT1:HOST2:PORT2, e.g. ${connectToExample})`);
}

function parsePort(s: string, entry: string): number {
  const n = /^\d{1,5}$/.test(s) ? Number(s) : NaN;
  if (!(n >= 1 && n <= 65535)) throw connectToError(`bad port ${JSON.stringify(s)} in entry ${JSON.stringify(entry)}`);
  return n;
}

/**
 * Parses WEBHOOK_CONNECT_TO (curl --connect-to syntax, restricted): HOST1 is a host name (matched after the same
 * normalisation `URL` applies), PORT1 a port, HOST2 an IP literal (IPv6 in brackets), PORT2 a port. Unset or
 * blank gives no entries; anything malformed throws an Error naming WEBHOOK_CONNECT_TO.
 */
export function parseConnectTo(raw: string | undefined): ConnectTo[] {
  if (raw === undefined || raw.trim() === "") return [];
  const out: ConnectTo[] = [];
  for (const part of raw.split(",")) {
    const entry = part.trim();
    if (entry === "") throw connectToError("empty entry");
    const m = /^([^:[\]]*):([^:[\]]*):(\[[^\]]*\]|[^:[\]]*):([^:[\]]*)$/.exec(entry);
    if (!m) throw connectToError(`malformed entry ${JSON.stringify(entry)}`);
    const [, host1 = "", port1 = "", host2 = "", port2 = ""] = m;
    if (!/^[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9.])?$/.test(host1)) {
      throw connectToError(`HOST1 must be a host name in entry ${JSON.stringify(entry)}`);
    }
    const host = new URL(`https://${host1}/`).hostname;
    if (isIP(unbracket(host)) !== 0) {
      throw connectToError(`HOST1 must be a host name, not an IP address, in entry ${JSON.stringify(entry)}`);
    }
    const bracketed = host2.startsWith("[");
    const toHost = unbracket(host2);
    if (isIP(toHost) !== (bracketed ? 6 : 4)) {
      throw connectToError(`HOST2 must be an IPv4 address or a bracketed IPv6 address in entry ${JSON.stringify(entry)}`);
    }
    const port = parsePort(port1, entry);
    const toPort = parsePort(port2, entry);
    if (out.some((e) => e.host === host && e.port === port)) {
      throw connectToError(`${host}:${port} is listed twice`);
    }
    out.push({ host, port, toHost, toPort });
  }
  return out;
}
