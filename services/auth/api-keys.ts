/**
 * The only writer of api_keys: a key issued (by the admin CLI or a merchant's own key or dashboard
 * session, CreateApiKey), and revoked. A key's secret is returned by its issue only; the table
 * holds its SHA-256 hash and its hint. Every update of a row tells each process's credential cache
 * to drop the key (the credential_changed trigger), so a revocation is refused everywhere at once
 * for whoever then settles (settleCredentialChanges).
 */
import type { EntityManager } from "../platform/db.ts";
import type { CursorCodec } from "../platform/cursor.ts";
import { newId } from "../platform/ids.ts";
import { findOwned, pageOwned, type OwnedPage } from "../platform/owned.ts";
import { ApiKey } from "./entities.ts";
import { generateApiKey, hashApiKey, keyHint, type Environment, type Owner, type Scope } from "./keys.ts";

export interface IssuedApiKey {
  id: string;
  merchantId: string;
  environment: Environment;
  hint: string;
  scopes: Scope[];
  createdAt: Date;
  /** The secret: shown once, to whoever issued it, and stored nowhere. */
  secret: string;
}

/** Issues a key of a merchant (who must exist) with `scopes` (each once, in the order given). */
export async function issueApiKey(em: EntityManager, merchantId: string, environment: Environment, scopes: readonly Scope[]): Promise<IssuedApiKey> {
  const secret = generateApiKey(environment);
  const key = {
    id: newId("key"),
    merchant: merchantId,
    environment,
    secretHash: hashApiKey(secret),
    hint: keyHint(secret),
    scopes: [...new Set(scopes)],
    createdAt: new Date(),
    revokedAt: null,
  };
  await em.insert(ApiKey, key);
  return { id: key.id, merchantId, environment, hint: key.hint, scopes: key.scopes, createdAt: key.createdAt, secret };
}

/**
 * Revokes a key not revoked yet; returns when it was revoked (now, or the first time), or
 * undefined when there is no such key. Only the first revocation is recorded: when it happened
 * matters to whoever audits the key's calls.
 */
export async function revokeApiKeyRow(em: EntityManager, id: string): Promise<Date | undefined> {
  const [row] = await em.execute<{ revoked_at: Date | string | null }[]>(`select revoked_at from api_keys where id = ?`, [id]);
  if (!row) return undefined;
  if (row.revoked_at !== null) return new Date(row.revoked_at);
  const [updated] = await em.execute<{ revoked_at: Date | string }[]>(`update api_keys set revoked_at = ? where id = ? and revoked_at is null returning revoked_at`, [new Date(), id]);
  // Revoked by another caller in between: theirs is the time.
  if (!updated) return revokeApiKeyRow(em, id);
  return new Date(updated.revoked_at);
}

/** A key as reads show it, with its last use (services/auth/key-last-use.ts): never its secret or hash. */
export interface ApiKeyRow {
  id: string;
  merchant_id: string;
  environment: string;
  hint: string;
  scopes: string[];
  created_at: Date | string;
  revoked_at: Date | string | null;
  last_used_at: Date | string | null;
}

const columns = `select k.id, k.merchant_id, k.environment, k.hint, k.scopes, k.created_at, k.revoked_at, u.last_used_at
  from api_keys k left join api_key_last_uses u on u.api_key_id = k.id`;

/** An owner's keys (the caller's merchant and environment), newest first, a page at a time. */
export function listOwnedApiKeys(em: EntityManager, cursors: CursorCodec, owner: Owner, page: { cursor: string | undefined; limit: number; binding: string }): Promise<OwnedPage<ApiKeyRow>> {
  return pageOwned<ApiKeyRow>(em, cursors, { select: columns, alias: "k", owner, filters: [], ...page });
}

/** Every key of a merchant, both environments, newest first (the admin CLI's list). */
export function merchantApiKeys(em: EntityManager, merchantId: string): Promise<ApiKeyRow[]> {
  return em.execute<ApiKeyRow[]>(`${columns} where k.merchant_id = ? order by k.created_at desc, k.id desc`, [merchantId]);
}

/** One of an owner's keys; another merchant's or environment's is not found. */
export function findOwnedApiKey(em: EntityManager, owner: Owner, id: string): Promise<ApiKeyRow | undefined> {
  return findOwned<ApiKeyRow>(em, `${columns} where k.id = ?`, id, owner);
}
