import type { EntityManager } from "../platform/db.ts";
import { newId } from "../platform/ids.ts";
import { ApiKey, InternalCredential, Merchant } from "./entities.ts";
import { issueApiKey, merchantApiKeys, revokeApiKeyRow } from "./api-keys.ts";
import { generateInternalCredential, hashApiKey, isEnvironment, isInternalRole, keyHint, type Environment, type Scope } from "./keys.ts";
import type { InternalRole } from "./principal.ts";
import { followedNetworks, networks as supportedNetworks } from "../vocabulary/assets.ts";
import { textColorOn, type ShopLook } from "../vocabulary/shop-look.ts";
import { insertMerchant, MerchantLookError, updateMerchantLook, type LookChange } from "./merchants.ts";

/** Issuance and revocation of merchants, API keys and internal credentials (admin CLI). */

export class AdminError extends Error {}

export async function createMerchant(em: EntityManager, name: string): Promise<{ id: string; name: string; created_at: string }> {
  const trimmed = name.trim();
  if (trimmed.length === 0 || trimmed.length > 200) throw new AdminError("--name must be 1 to 200 characters");
  const merchant = await insertMerchant(em, trimmed).catch(asAdminError);
  return { id: merchant.id, name: merchant.name, created_at: merchant.createdAt.toISOString() };
}

/** A refused name or look, as the CLI's flag says it. */
function asAdminError(err: unknown): never {
  if (err instanceof MerchantLookError) throw new AdminError(`--${err.field.replace("_", "-")}: ${err.message}`);
  throw err;
}

/** admin merchant update: the name and look, each flag optional, "" removing a logo or a colour; nothing changes when one is refused. */
export async function updateMerchant(em: EntityManager, merchantId: string, change: LookChange) {
  const updated = await updateMerchantLook(em, merchantId, change).catch(asAdminError);
  if (!updated) throw new AdminError(`no merchant ${merchantId}`);
  return merchantShown(updated);
}

/** A merchant's name and look as the CLI prints it: null where there is none. */
function merchantShown(m: ShopLook & { id: string; createdAt: Date }) {
  return { id: m.id, name: m.name, logo_url: m.logoUrl ?? null, brand_color: m.brandColor ?? null, brand_text_color: m.brandColor ? textColorOn(m.brandColor) : null, created_at: m.createdAt.toISOString() };
}

export async function createApiKey(em: EntityManager, merchantId: string, environment: Environment, scopes: Scope[]) {
  const merchant = await em.findOne(Merchant, { id: merchantId });
  if (!merchant) throw new AdminError(`no merchant ${merchantId}`);
  const key = await issueApiKey(em, merchantId, environment, scopes);
  return { id: key.id, merchant: merchantId, api_key: key.secret, environment, scopes: key.scopes, created_at: key.createdAt.toISOString() };
}

export async function revokeApiKey(em: EntityManager, id: string) {
  const key = await em.findOne(ApiKey, { id });
  if (!key) throw new AdminError(`no API key ${id}`);
  const revokedAt = (await revokeApiKeyRow(em, id)) ?? new Date();
  return { id, hint: key.hint, revoked_at: revokedAt.toISOString() };
}

/** The networks given to --networks: supported ones, each once, in order; undefined stays undefined (unscoped). */
export function checkCredentialNetworks(networks: readonly string[] | undefined): string[] | undefined {
  if (networks === undefined) return undefined;
  if (networks.length === 0) throw new AdminError(`--networks takes one or more of ${supportedNetworks.join(", ")}`);
  const bad = networks.find((n) => !supportedNetworks.includes(n));
  if (bad !== undefined) throw new AdminError(`--networks takes ${supportedNetworks.join(", ")}; got "${bad}"`);
  return [...new Set(networks)].sort();
}

/**
 * A credential of an internal service (e.g. the chain watcher); its secret is shown here and never
 * again. Without `expiresAt` (an operator's, from the admin CLI) it is valid until revoked.
 * `networks` are those it may speak for as a watcher (claim, report, record on); without them,
 * only networks no built-in watcher follows (services/auth/principal.ts speaksFor).
 */
export async function createInternalCredential(
  em: EntityManager,
  name: string,
  roles: readonly InternalRole[],
  environment: Environment,
  o: { expiresAt?: Date; networks?: readonly string[] } = {},
) {
  const trimmed = name.trim();
  if (trimmed.length === 0 || trimmed.length > 200) throw new AdminError("--name must be 1 to 200 characters");
  if (roles.length === 0 || roles.some((r) => !isInternalRole(r))) throw new AdminError("--roles takes observe and/or admin");
  if (!isEnvironment(environment)) throw new AdminError(`--environment must be test or live, got "${environment}"`);
  const networks = checkCredentialNetworks(o.networks);
  const secret = generateInternalCredential();
  const credential = {
    id: newId("ic"),
    name: trimmed,
    secretHash: hashApiKey(secret),
    hint: keyHint(secret),
    roles: [...new Set(roles)].sort(),
    environment,
    networks: networks ?? null,
    createdAt: new Date(),
    revokedAt: null,
    expiresAt: o.expiresAt ?? null,
  };
  await em.insert(InternalCredential, credential);
  return {
    id: credential.id,
    name: credential.name,
    roles: credential.roles,
    environment,
    speaks_for: networksShown(networks ?? null),
    credential: secret,
    created_at: credential.createdAt.toISOString(),
    ...(o.expiresAt ? { expires_at: o.expiresAt.toISOString() } : {}),
  };
}

export async function revokeInternalCredential(em: EntityManager, id: string) {
  const credential = await em.findOne(InternalCredential, { id });
  if (!credential) throw new AdminError(`no internal credential ${id}`);
  const revokedAt = credential.revokedAt ?? new Date();
  // Only a first revocation is recorded: when it happened matters to whoever audits the service's calls.
  if (!credential.revokedAt) await em.nativeUpdate(InternalCredential, { id, revokedAt: null }, { revokedAt });
  return { id, name: credential.name, revoked_at: revokedAt.toISOString() };
}

const iso = (d: Date | null) => (d === null ? null : d.toISOString());

/** A merchant's API keys, newest first: hints only, never a secret. */
/** Every merchant, oldest first. */
export async function listMerchants(em: EntityManager) {
  const rows = await em.find(Merchant, {}, { orderBy: { createdAt: "asc", id: "asc" } });
  return rows.map((m) => ({ id: m.id, name: m.name, logo_url: m.logoUrl ?? null, brand_color: m.brandColor ?? null, created_at: iso(m.createdAt) }));
}

/** One merchant, with its active API keys per environment. */
export async function showMerchant(em: EntityManager, merchantId: string) {
  const merchant = await em.findOne(Merchant, { id: merchantId });
  if (!merchant) throw new AdminError(`no merchant ${merchantId}`);
  const keys = await em.find(ApiKey, { merchant: merchantId, revokedAt: null }, { orderBy: { createdAt: "desc" } });
  const environments: Record<string, Record<string, unknown>> = { test: {}, live: {} };
  for (const environment of ["test", "live"]) {
    // The hint is the key's prefix as shown at creation: enough to tell keys apart, never the secret.
    const active = keys.filter((k) => k.environment === environment).map((k) => ({ id: k.id, hint: k.hint, scopes: k.scopes, created_at: iso(k.createdAt) }));
    environments[environment] = { active_api_keys: active.length, api_keys: active };
  }
  return { id: merchant.id, name: merchant.name, logo_url: merchant.logoUrl ?? null, brand_color: merchant.brandColor ?? null, created_at: iso(merchant.createdAt), environments };
}

export async function listApiKeys(em: EntityManager, merchantId: string) {
  const merchant = await em.findOne(Merchant, { id: merchantId });
  if (!merchant) throw new AdminError(`no merchant ${merchantId}`);
  // With each key's last use (null: never, or not within the minute its process writes it).
  const rows = await merchantApiKeys(em, merchantId);
  const at = (d: Date | string | null) => iso(d === null ? null : new Date(d));
  return rows.map((k) => ({
    id: k.id,
    environment: k.environment,
    hint: k.hint,
    scopes: k.scopes,
    created_at: at(k.created_at),
    revoked_at: at(k.revoked_at),
    last_used_at: at(k.last_used_at),
  }));
}

/** What a credential may speak for, as shown: its networks, or (unscoped) the networks no built-in watcher follows. */
function networksShown(networks: readonly string[] | null): { scoped: boolean; networks: string[] } {
  if (networks !== null) return { scoped: true, networks: [...networks] };
  return { scoped: false, networks: supportedNetworks.filter((n) => !(followedNetworks as readonly string[]).includes(n)) };
}

/** Why a credential must be issued anew (null: it need not): one from before roles and environments holds nothing. */
function reissueReason(c: { environment?: string | null; roles: string[] }): string | null {
  if (!c.environment) return "issued before roles and environments: it holds no role and is refused everywhere; issue a new one (internal-credential create --roles --environment [--networks]) and revoke this one";
  return null;
}

/**
 * Internal credentials, newest first: hints only. expires_at is null for one that never expires.
 * speaks_for is what it may claim, report and record on; needs_reissue, with why, marks one from
 * before roles and environments (it holds no role).
 */
export async function listInternalCredentials(em: EntityManager) {
  const rows = await em.find(InternalCredential, {}, { orderBy: { createdAt: "desc" } });
  return rows.map((c) => ({
    id: c.id,
    name: c.name,
    hint: c.hint,
    roles: c.roles,
    environment: c.environment ?? null,
    speaks_for: networksShown(c.networks ?? null),
    needs_reissue: reissueReason(c) !== null,
    ...(reissueReason(c) === null ? {} : { reissue: reissueReason(c) }),
    created_at: iso(c.createdAt),
    revoked_at: iso(c.revokedAt ?? null),
    expires_at: iso(c.expiresAt ?? null),
  }));
}

/** What the credentials of watchers beside the rpc role are named: one per process and environment. */
const inProcessWatcherPrefix = "in-process chain watcher";

/** `in-process chain watcher (test) <host>-<pid>`: an operator can tell which process holds it. */
export function inProcessWatcherName(environment: Environment, processName: string): string {
  return `${inProcessWatcherPrefix} (${environment}) ${processName}`.slice(0, 200);
}

/**
 * The credential a watcher running beside the rpc role sends in-process: its process's own (no
 * start revokes another process's), expiring at `expiresAt` unless renewed, revoked at a clean
 * stop (services/auth/watcher-credentials.ts).
 */
export async function issueInProcessWatcherCredential(em: EntityManager, environment: Environment, processName: string, expiresAt: Date, networks: readonly string[]) {
  const { id, name, credential } = await createInternalCredential(em, inProcessWatcherName(environment, processName), ["observe"], environment, { expiresAt, networks });
  return { id, name, credential, expiresAt };
}

/** Moves an unrevoked credential's expiry to `expiresAt`; false when it is revoked or gone. */
export async function renewInternalCredential(em: EntityManager, id: string, expiresAt: Date): Promise<boolean> {
  return (await em.nativeUpdate(InternalCredential, { id, revokedAt: null }, { expiresAt })) > 0;
}

/** Revokes the given credentials (those not revoked yet). */
export async function revokeInternalCredentials(em: EntityManager, ids: readonly string[]): Promise<void> {
  if (ids.length === 0) return;
  await em.nativeUpdate(InternalCredential, { id: { $in: [...ids] }, revokedAt: null }, { revokedAt: new Date() });
}

/**
 * Deletes in-process watchers' credentials that expired before `before` (revoked at a clean stop,
 * or left by a process that died): they can no longer be used. An unexpired one, another running
 * process's, is never touched; nor is an operator's (no expiry).
 */
export async function removeExpiredInProcessWatcherCredentials(em: EntityManager, before: Date): Promise<number> {
  return em.nativeDelete(InternalCredential, { name: { $like: `${inProcessWatcherPrefix} (%` }, expiresAt: { $ne: null, $lt: before } });
}
