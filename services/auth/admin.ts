import type { EntityManager } from "../platform/db.ts";
import { newId } from "../platform/ids.ts";
import { ApiKey, Merchant } from "./entities.ts";
import { generateApiKey, hashApiKey, keyHint, type Environment, type Scope } from "./keys.ts";

/** Issuance and revocation of merchants and API keys (admin CLI). */

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
