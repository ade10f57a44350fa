import { createHash } from "node:crypto";
import { randomBase62 } from "../platform/ids.ts";
import { scopes, type Scope } from "../vocabulary/scopes.ts";

export const environments = ["test", "live"] as const;
export type Environment = (typeof environments)[number];

/** Whose data a query touches: the API key decides both, and every query is scoped by both. */
export interface Owner {
  merchantId: string;
  environment: Environment;
}

/** Every scope a key can hold (services/vocabulary/scopes.ts, where request fields check them too). */
export { scopes, type Scope } from "../vocabulary/scopes.ts";

export function isEnvironment(value: string): value is Environment {
  return (environments as readonly string[]).includes(value);
}

export function isScope(value: string): value is Scope {
  return (scopes as readonly string[]).includes(value);
}

const keyPattern = /^sk_(test|live)_[0-9A-Za-z]{32}$/;

/** A new API key secret: "sk_test_" or "sk_live_" and 32 base62 characters (~190 bits). */
export function generateApiKey(environment: Environment): string {
  return `sk_${environment}_${randomBase62(32)}`;
}

/** Keys are stored only as this hash; the secret is shown once, at creation. */
export function hashApiKey(secret: string): string {
  return createHash("sha256").update(secret).digest("hex");
}

/** A short, non-secret hint of a key for listings and logs: "sk_test_Ab12…". */
export function keyHint(secret: string): string {
  return `${secret.slice(0, 12)}…`;
}

export type BearerResult =
  | { ok: true; secret: string; environment: Environment }
  | { ok: false; reason: "missing" | "malformed" };

/** Reads "Authorization: Bearer <api_key>" without looking anything up. */
export function parseBearer(header: string | null): BearerResult {
  if (header === null || header.trim() === "") return { ok: false, reason: "missing" };
  const match = /^Bearer +(\S+) *$/i.exec(header);
  if (!match) return { ok: false, reason: "malformed" };
  const secret = match[1] as string;
  const key = keyPattern.exec(secret);
  if (!key) return { ok: false, reason: "malformed" };
  return { ok: true, secret, environment: key[1] as Environment };
}

const internalPattern = /^int_[0-9A-Za-z]{40}$/;

/** A new internal credential (chain watcher, admin tools): "int_" and 40 base62 characters. */
export function generateInternalCredential(): string {
  return `int_${randomBase62(40)}`;
}

/** The secret of "Authorization: Bearer int_…", or why there is none. */
export function parseInternalBearer(header: string | null): { ok: true; secret: string } | { ok: false; reason: "missing" | "malformed" } {
  if (header === null || header.trim() === "") return { ok: false, reason: "missing" };
  const match = /^Bearer +(\S+) *$/i.exec(header);
  if (!match || !internalPattern.test(match[1] as string)) return { ok: false, reason: "malformed" };
  return { ok: true, secret: match[1] as string };
}

const sitePattern = /^site_(test|live)_[0-9A-Za-z]{32}$/;

/** A new Site Gateway credential: "site_test_" or "site_live_" and 32 base62 characters. */
export function generateSiteCredential(environment: Environment): string {
  return `site_${environment}_${randomBase62(32)}`;
}

/** The secret of "Authorization: Bearer site_…", or why there is none. */
export function parseSiteBearer(header: string | null): { ok: true; secret: string } | { ok: false; reason: "missing" | "malformed" } {
  if (header === null || header.trim() === "") return { ok: false, reason: "missing" };
  const match = /^Bearer +(\S+) *$/i.exec(header);
  if (!match || !sitePattern.test(match[1] as string)) return { ok: false, reason: "malformed" };
  return { ok: true, secret: match[1] as string };
}

/**
 * A browser origin as the Origin header carries it: scheme, host and port, nothing else
 * ("https://shop.example", "http://localhost:3000"; a trailing slash, as people paste it, is
 * dropped). Returns the canonical form, or undefined.
 */
export function canonicalOrigin(value: string): string | undefined {
  if (!/^https?:\/\/[^/?#@\s]+\/?$/i.test(value)) return undefined;
  try {
    const url = new URL(value);
    return url.origin === "null" ? undefined : url.origin;
  } catch {
    return undefined;
  }
}

const cashierPattern = /^pos_(test|live)_[0-9A-Za-z]{32}$/;

/** A new cashier session secret: "pos_test_" or "pos_live_" and 32 base62 characters. */
export function generateCashierSession(environment: Environment): string {
  return `pos_${environment}_${randomBase62(32)}`;
}

/** The secret of "Authorization: Bearer pos_…", or why there is none. */
export function parseCashierBearer(header: string | null): { ok: true; secret: string } | { ok: false; reason: "missing" | "malformed" } {
  if (header === null || header.trim() === "") return { ok: false, reason: "missing" };
  const match = /^Bearer +(\S+) *$/i.exec(header);
  if (!match || !cashierPattern.test(match[1] as string)) return { ok: false, reason: "malformed" };
  return { ok: true, secret: match[1] as string };
}

const dashboardSessionPattern = /^dsh_(test|live)_[0-9A-Za-z]{40}$/;

/** A new dashboard session token (the dashboard's cookie): "dsh_test_" or "dsh_live_" and 40 base62 characters. */
export function generateDashboardSession(environment: Environment): string {
  return `dsh_${environment}_${randomBase62(40)}`;
}

/** Whether a string is shaped as a dashboard session token (nothing else is looked up). */
export function isDashboardSessionToken(token: string): boolean {
  return dashboardSessionPattern.test(token);
}

/** The token of "Authorization: Bearer dsh_…", or undefined when it is not one. */
export function parseDashboardBearer(header: string | null): string | undefined {
  const match = /^Bearer +(\S+) *$/i.exec(header ?? "");
  return match && dashboardSessionPattern.test(match[1] as string) ? (match[1] as string) : undefined;
}

/** A new one-time dashboard link token: "dlk_" and 40 base62 characters. */
export function generateDashboardLink(): string {
  return `dlk_${randomBase62(40)}`;
}

/** Whether a string has the shape of a dashboard link token (anything else is not looked up). */
export function isDashboardLinkToken(token: string): boolean {
  return /^dlk_[0-9A-Za-z]{40}$/.test(token);
}

/** The roles an internal credential can hold (the route option's internal_role). */
export function isInternalRole(value: string): value is "observe" | "admin" {
  return value === "observe" || value === "admin";
}
