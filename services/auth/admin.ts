import type { EntityManager } from "../platform/db.ts";
import { newId } from "../platform/ids.ts";
import { ApiKey, InternalCredential, Merchant } from "./entities.ts";
import { generateApiKey, generateInternalCredential, hashApiKey, isEnvironment, isInternalRole, keyHint, type Environment, type Scope } from "./keys.ts";
import type { InternalRole } from "./principal.ts";

/** Issuance and revocation of merchants, API keys and internal credentials (admin CLI). */

export class AdminError extends Error {}

export async function createMerchant(em: EntityManager, name: string): Promise<{ id: string; name: string; created_at: string }> {
  const trimmed = name.trim();
  if (trimmed.length === 0 || trimmed.length > 200) throw new AdminError("--name must be 1 to 200 characters");
  const merchant = { id: newId("mer"), name: trimmed, createdAt: new Date() };
  await em.insert(Merchant, merchant);
  return { id: merchant.id, name: merchant.name, created_at: merchant.createdAt.toISOString() };
}

export async function createApiKey(em: EntityManager, merchantId: string, environment: Environment, scopes: Scope[]) {
  const merchant = await em.findOne(Merchant, { id: merchantId });
  if (!merchant) throw new AdminError(`no merchant ${merchantId}`);
  const secret = generateApiKey(environment);
  const key = {
    id: newId("key"),
    merchant: merchantId,
    environment,
    secretHash: hashApiKey(secret),
    hint: keyHint(secret),
    scopes,
    createdAt: new Date(),
    revokedAt: null,
  };
  await em.insert(ApiKey, key);
  return { id: key.id, merchant: merchantId, api_key: secret, environment, scopes, created_at: key.createdAt.toISOString() };
}

export async function revokeApiKey(em: EntityManager, id: string) {
  const key = await em.findOne(ApiKey, { id });
  if (!key) throw new AdminError(`no API key ${id}`);
  const revokedAt = key.revokedAt ?? new Date();
  if (!key.revokedAt) await em.nativeUpdate(ApiKey, { id }, { revokedAt });
  return { id, hint: key.hint, revoked_at: revokedAt.toISOString() };
}

/** A credential of an internal service (e.g. the chain watcher); its secret is shown here and never again. */
export async function createInternalCredential(em: EntityManager, name: string, roles: readonly InternalRole[], environment: Environment) {
  const trimmed = name.trim();
  if (trimmed.length === 0 || trimmed.length > 200) throw new AdminError("--name must be 1 to 200 characters");
  if (roles.length === 0 || roles.some((r) => !isInternalRole(r))) throw new AdminError("--roles takes observe and/or admin");
  if (!isEnvironment(environment)) throw new AdminError(`--environment must be test or live, got "${environment}"`);
  const secret = generateInternalCredential();
  const credential = {
    id: newId("ic"),
    name: trimmed,
    secretHash: hashApiKey(secret),
    hint: keyHint(secret),
    roles: [...new Set(roles)].sort(),
    environment,
    createdAt: new Date(),
    revokedAt: null,
  };
  await em.insert(InternalCredential, credential);
  return { id: credential.id, name: credential.name, roles: credential.roles, environment, credential: secret, created_at: credential.createdAt.toISOString() };
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
  return rows.map((m) => ({ id: m.id, name: m.name, created_at: iso(m.createdAt) }));
}

/** One merchant, with its active API keys per environment. */
export async function showMerchant(em: EntityManager, merchantId: string) {
  const merchant = await em.findOne(Merchant, { id: merchantId });
  if (!merchant) throw new AdminError(`no merchant ${merchantId}`);
  const counts = await em.execute<{ environment: string; n: string }[]>(
    `select environment, count(*) as n from api_keys where merchant_id = ? and revoked_at is null group by environment`,
    [merchantId],
  );
  const environments: Record<string, Record<string, number>> = { test: {}, live: {} };
  for (const c of counts) (environments[c.environment] ??= {}).active_api_keys = Number(c.n);
  return { id: merchant.id, name: merchant.name, created_at: iso(merchant.createdAt), environments };
}

export async function listApiKeys(em: EntityManager, merchantId: string) {
  const merchant = await em.findOne(Merchant, { id: merchantId });
  if (!merchant) throw new AdminError(`no merchant ${merchantId}`);
  const rows = await em.find(ApiKey, { merchant: merchantId }, { orderBy: { createdAt: "desc" } });
  return rows.map((k) => ({ id: k.id, environment: k.environment, hint: k.hint, scopes: k.scopes, created_at: iso(k.createdAt), revoked_at: iso(k.revokedAt ?? null) }));
}

/** Internal credentials, newest first: hints only. */
export async function listInternalCredentials(em: EntityManager) {
  const rows = await em.find(InternalCredential, {}, { orderBy: { createdAt: "desc" } });
  return rows.map((c) => ({ id: c.id, name: c.name, hint: c.hint, roles: c.roles, environment: c.environment ?? null, created_at: iso(c.createdAt), revoked_at: iso(c.revokedAt ?? null) }));
}

/**
 * The credential a watcher running beside the rpc role sends in-process: issued at each start,
 * the one the previous start issued revoked, so no secret outlives its process for long.
 */
export async function issueInProcessWatcherCredential(em: EntityManager, environment: Environment): Promise<string> {
  const name = `in-process chain watcher (${environment})`;
  await em.nativeUpdate(InternalCredential, { name, revokedAt: null }, { revokedAt: new Date() });
  return (await createInternalCredential(em, name, ["observe"], environment)).credential;
}
