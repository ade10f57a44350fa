// Webhook delivery security policy: which endpoint URLs may be called, and which address a delivery connects to.
//
// Rules: https only, port 443 only, no credentials in the URL, at most `maxUrlLength` characters, an absolute URL,
// and every address the host resolves to must be public. The check runs on the addresses themselves, so a
// delivery must connect to the returned `Target.address` (pin it) rather than resolving the name again.
//
// Addresses are classified by a small CIDR matcher over bigints instead of `net.BlockList`: BlockList matches
// IPv4-mapped IPv6 (::ffff:a.b.c.d) against IPv4 rules, but it also lets an IPv6 rule such as ::ffff:0:0/96
// match a plain IPv4 address, and it knows nothing of IPv4-compatible, NAT64 or 6to4 embeddings, which need
// the embedded IPv4 address extracted and judged here anyway.
import { promises as dns } from "node:dns";
import { isIP } from "node:net";
import { unbracket, type ConnectTo } from "../platform/connect-to.ts";
import { webhookUrlFault } from "../vocabulary/formats.ts";
import { getOption } from "@bufbuild/protobuf";
import { field as fieldRules } from "../../gen/payments/v1/options_pb.ts";
import { CreateWebhookEndpointRequestSchema } from "../../gen/payments/v1/webhooks_pb.ts";

export const maxUrlLength = (() => {
  // The create request's rule (proto) is the one source; a stored URL is held to it at every attempt too.
  const rules = getOption(CreateWebhookEndpointRequestSchema.field.url, fieldRules);
  if (rules.maxLen === undefined) throw new Error("CreateWebhookEndpointRequest.url has no max_len rule");
  return rules.maxLen;
})();

/** How long a DNS lookup may take before the host counts as unresolvable. */
export const lookupTimeoutMs = 5_000;

/** A URL or address the policy refuses; `reason` is a short sentence safe to show to the merchant, e.g. "the URL must use https", "port 8443 is not allowed; webhooks are sent to port 443 only", "10.1.2.3 is a private address". */
export class PolicyRejection extends Error {
  readonly reason: string;
  constructor(reason: string, options?: ErrorOptions) {
    super(reason, options);
    this.name = "PolicyRejection";
    this.reason = reason;
  }
}

/**
 * The host did not resolve. Refused when an endpoint is created; at a
 * delivery attempt it is a transport error (retryable), since DNS fails transiently.
 */
export class UnresolvedHost extends PolicyRejection {}

// ---------------------------------------------------------------------------------------------------------------
// IP literals and CIDR blocks

type Version = 4 | 6;
interface Ip {
  version: Version;
  value: bigint;
}

const bitsOf = (v: Version) => (v === 4 ? 32 : 128);

function parseIpv4(s: string): bigint | undefined {
  if (isIP(s) !== 4) return undefined;
  return s.split(".").reduce((acc, part) => (acc << 8n) | BigInt(Number(part)), 0n);
}

function parseIpv6(s: string): bigint | undefined {
  if (isIP(s) !== 6) return undefined;
  let text = s;
  // A trailing dotted quad stands for the last two groups.
  const lastColon = text.lastIndexOf(":");
  const tail = text.slice(lastColon + 1);
  if (tail.includes(".")) {
    const v4 = parseIpv4(tail);
    if (v4 === undefined) return undefined;
    text = `${text.slice(0, lastColon + 1)}${(v4 >> 16n).toString(16)}:${(v4 & 0xffffn).toString(16)}`;
  }
  const halves = text.split("::");
  if (halves.length > 2) return undefined;
  const groups = (h: string | undefined) => (h === undefined || h === "" ? [] : h.split(":"));
  const head = groups(halves[0]);
  const rest = groups(halves[1]);
  const fill = halves.length === 2 ? 8 - head.length - rest.length : 0;
  const all = [...head, ...Array<string>(fill).fill("0"), ...rest];
  if (all.length !== 8) return undefined;
  return all.reduce((acc, g) => (acc << 16n) | BigInt(parseInt(g, 16)), 0n);
}

/** Parses an IPv4 or IPv6 literal (IPv6 optionally in brackets); a zone index is reported separately. */
function parseIp(raw: string): { ip: Ip; zoned: boolean } | undefined {
  let s = raw.startsWith("[") && raw.endsWith("]") ? raw.slice(1, -1) : raw;
  const v4 = parseIpv4(s);
  if (v4 !== undefined) return { ip: { version: 4, value: v4 }, zoned: false };
  const percent = s.indexOf("%");
  const zoned = percent >= 0;
  if (zoned) s = s.slice(0, percent);
  const v6 = parseIpv6(s);
  return v6 === undefined ? undefined : { ip: { version: 6, value: v6 }, zoned };
}

interface Block {
  version: Version;
  prefix: bigint;
  length: number;
}

function block(cidr: string): Block {
  const [addr = "", len = ""] = cidr.split("/");
  const parsed = parseIp(addr);
  if (!parsed) throw new Error(`bad CIDR ${cidr}`);
  return { version: parsed.ip.version, prefix: parsed.ip.value, length: Number(len) };
}

function inBlock(ip: Ip, b: Block): boolean {
  if (ip.version !== b.version) return false;
  const shift = BigInt(bitsOf(b.version) - b.length);
  return ip.value >> shift === b.prefix >> shift;
}

function formatIpv4(value: bigint): string {
  return [24n, 16n, 8n, 0n].map((s) => String((value >> s) & 0xffn)).join(".");
}

// ---------------------------------------------------------------------------------------------------------------
// Classification

/** IPv4 special-purpose blocks that are refused, first match wins. */
const ipv4Blocks: [Block, string][] = (
  [
    ["0.0.0.0/8", "unspecified"],
    ["10.0.0.0/8", "private"],
    ["100.64.0.0/10", "carrier-grade NAT"],
    ["127.0.0.0/8", "loopback"],
    ["169.254.0.0/16", "link-local"],
    ["172.16.0.0/12", "private"],
    ["192.0.0.0/24", "IETF protocol assignment"],
    ["192.0.2.0/24", "documentation"],
    ["192.88.99.0/24", "6to4 relay anycast"],
    ["192.168.0.0/16", "private"],
    ["198.18.0.0/15", "benchmarking"],
    ["198.51.100.0/24", "documentation"],
    ["203.0.113.0/24", "documentation"],
    ["224.0.0.0/4", "multicast"],
    ["255.255.255.255/32", "broadcast"],
    ["240.0.0.0/4", "reserved"],
  ] as const
).map(([c, label]) => [block(c), label]);

/** IPv6 blocks that are refused outright (after the embedded-IPv4 forms), first match wins. */
const ipv6Blocks: [Block, string][] = (
  [
    ["100::/64", "discard-only"],
    ["2001::/32", "Teredo"],
    ["2001:2::/48", "benchmarking"],
    ["2001:10::/28", "reserved"],
    ["2001:db8::/32", "documentation"],
    ["3fff::/20", "documentation"],
    ["fc00::/7", "unique local"],
    ["fe80::/10", "link-local"],
    ["fec0::/10", "site-local"],
    ["ff00::/8", "multicast"],
  ] as const
).map(([c, label]) => [block(c), label]);

const unspecified6 = block("::/128");
const loopback6 = block("::1/128");
const globalUnicast6 = block("2000::/3");
const localUseNat64 = block("64:ff9b:1::/48");

/** IPv6 forms that carry an IPv4 address; the IPv4 address decides. */
const embeddings: { block: Block; kind: string; extract: (v: bigint) => bigint }[] = [
  { block: block("::ffff:0:0/96"), kind: "IPv4-mapped", extract: (v) => v & 0xffffffffn },
  { block: block("::ffff:0:0:0/96"), kind: "IPv4-translated", extract: (v) => v & 0xffffffffn },
  { block: block("::/96"), kind: "IPv4-compatible", extract: (v) => v & 0xffffffffn },
  { block: block("64:ff9b::/96"), kind: "NAT64", extract: (v) => v & 0xffffffffn },
  // Local-use NAT64 (RFC 8215) may use any prefix length; the /96 position is judged, and the block is refused
  // even when that address is public because it is not globally reachable.
  { block: localUseNat64, kind: "local-use NAT64", extract: (v) => v & 0xffffffffn },
  { block: block("2002::/16"), kind: "6to4", extract: (v) => (v >> 80n) & 0xffffffffn },
];

interface Verdict {
  /** Short category, e.g. "private". */
  label: string;
  /** For embedded forms: how the IPv4 address is carried, and the IPv4 address. */
  via?: { kind: string; ipv4: string };
}

function classify4(value: bigint): string | undefined {
  const ip: Ip = { version: 4, value };
  return ipv4Blocks.find(([b]) => inBlock(ip, b))?.[1];
}

function classify(raw: string): Verdict | undefined {
  const parsed = parseIp(raw);
  if (!parsed) return { label: "not an IP address" };
  const { ip, zoned } = parsed;
  if (ip.version === 4) {
    const label = classify4(ip.value);
    return label === undefined ? undefined : { label };
  }
  if (inBlock(ip, unspecified6)) return { label: "unspecified" };
  if (inBlock(ip, loopback6)) return { label: "loopback" };
  for (const e of embeddings) {
    if (!inBlock(ip, e.block)) continue;
    const v4 = e.extract(ip.value);
    const label = classify4(v4);
    const via = { kind: e.kind, ipv4: formatIpv4(v4) };
    if (label !== undefined) return { label, via };
    if (e.block === localUseNat64) return { label: "local-use NAT64" };
    return zoned ? { label: "scoped" } : undefined;
  }
  const label = ipv6Blocks.find(([b]) => inBlock(ip, b))?.[1];
  if (label !== undefined) return { label };
  if (!inBlock(ip, globalUnicast6)) return { label: "reserved" };
  return zoned ? { label: "scoped" } : undefined;
}

function article(label: string): string {
  return /^(?:[aeio]|un(?!i))/i.test(label) ? "an" : "a";
}

/** Completes "<ip> is …" / "…, which is …". */
function phrase(v: Verdict): string {
  const base =
    v.label === "not an IP address"
      ? "not an IP address"
      : v.label === "scoped"
        ? "a scoped address (it has a zone index)"
        : `${article(v.label)} ${v.label} address`;
  return v.via ? `the ${v.via.kind} form of ${v.via.ipv4}, ${base}` : base;
}

/** undefined when the IP literal is public; otherwise a reason such as "loopback", "private", "link-local", "carrier-grade NAT", "multicast", "broadcast", "unspecified", "reserved", "unique local", "documentation" etc. */
export function nonPublicReason(ip: string): string | undefined {
  const v = classify(ip);
  if (!v) return undefined;
  return v.via ? `${v.label} (${v.via.kind} ${v.via.ipv4})` : v.label;
}

// ---------------------------------------------------------------------------------------------------------------
// URL syntax

/** Syntax rules only (no DNS): returns the parsed URL or throws PolicyRejection. A host that is an IP literal is judged here too, since that needs no DNS. */
export function checkUrlSyntax(raw: string): URL {
  if (typeof raw !== "string") throw new PolicyRejection("the URL must be a string");
  const tooLong = `the URL must be at most ${maxUrlLength} characters long`;
  if (raw.length > maxUrlLength) throw new PolicyRejection(tooLong);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new PolicyRejection("the URL is not a valid absolute URL");
  }
  const fault = webhookUrlFault(url);
  if (fault) throw new PolicyRejection(fault);
  if (url.href.length > maxUrlLength) throw new PolicyRejection(tooLong);
  const host = unbracket(url.hostname);
  if (isIP(host) !== 0) {
    const v = classify(host);
    if (v) throw new PolicyRejection(`${host} is ${phrase(v)}`);
  }
  return url;
}

// ---------------------------------------------------------------------------------------------------------------
// Full policy

/** Where an attempt connects: the checked address (the connection is pinned to it), the port, and the TLS server name to verify. */
export interface Target {
  hostname: string;
  address: string;
  port: number;
  servername: string | undefined;
  overridden: boolean;
}

export type Lookup = (hostname: string) => Promise<{ address: string; family: number }[]>;

const defaultLookup: Lookup = (hostname) => dns.lookup(hostname, { all: true, verbatim: true });

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(Object.assign(new Error(`lookup timed out after ${ms} ms`), { code: "ETIMEOUT" })), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

/** Full policy: syntax, then connect-to override, then DNS (all addresses, via `lookup`, default dns.promises.lookup with {all:true, verbatim:true}) — every address must be public; returns the first address. Throws PolicyRejection. `servername` is the hostname unless the hostname is an IP literal (SNI must not be an IP). */
export async function resolveTarget(
  raw: string | URL,
  connectTo: readonly ConnectTo[],
  lookup: Lookup = defaultLookup,
  options: { timeoutMs?: number } = {},
): Promise<Target> {
  const url = checkUrlSyntax(typeof raw === "string" ? raw : raw.href);
  const hostname = unbracket(url.hostname);
  const port = 443;

  if (isIP(hostname) !== 0) {
    // Already judged by checkUrlSyntax; no DNS for literals.
    return { hostname, address: hostname, port, servername: undefined, overridden: false };
  }
  // TLS server names carry no trailing dot.
  const servername = hostname.endsWith(".") ? hostname.slice(0, -1) : hostname;

  const override = connectTo.find((e) => e.host === hostname && e.port === port);
  if (override) {
    return { hostname, address: override.toHost, port: override.toPort, servername, overridden: true };
  }

  let answers: { address: string; family: number }[];
  try {
    answers = await withTimeout(lookup(hostname), options.timeoutMs ?? lookupTimeoutMs);
  } catch (err) {
    throw new UnresolvedHost(`host ${hostname} could not be resolved`, { cause: err });
  }
  const first = answers[0];
  if (!first) throw new UnresolvedHost(`host ${hostname} could not be resolved`);
  for (const { address } of answers) {
    const v = classify(address);
    if (v) throw new PolicyRejection(`host ${hostname} resolves to ${address}, which is ${phrase(v)}`);
  }
  return { hostname, address: first.address, port, servername, overridden: false };
}
