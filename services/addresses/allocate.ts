import type { Owner } from "../auth/keys.ts";
import type { EntityManager } from "../platform/db.ts";
import { apiError } from "../platform/errors.ts";
import { builtinAddress, deriveAddress, supportsAccountKey } from "./keys.ts";

export interface DepositAddress {
  address: string;
  /** The derivation index, when derived from an account key. */
  index: number | null;
  /** Where it came from: the merchant's account key, its imported pool, or the built-in Test key. */
  kind: AllocationKind;
}

export type AllocationKind = "account_key" | "pool" | "builtin";

/**
 * The built-in Test keys' index sequences, one per key: the EVM networks share ethereum's, as they
 * share its key (m/44'/60'/0'), so an index is one address on every EVM chain and goes to one
 * intent only. A sequence each handed the same address to an ethereum intent and a base one, and a
 * payment sent on the wrong chain counted for the other intent (Migration20261202160000_EvmSharedIndex).
 * A merchant's own keys cannot meet this: one key is the source of one network only (admin.ts).
 */
export const testSequences: Record<string, string> = {
  bitcoin: "test_address_index_bitcoin",
  ethereum: "test_address_index_ethereum",
  tron: "test_address_index_tron",
  solana: "test_address_index_solana",
  polygon: "test_address_index_ethereum",
  base: "test_address_index_ethereum",
  arbitrum: "test_address_index_ethereum",
};

/**
 * Conditions, to be AND-ed into a statement, that an address reserved ahead (reserve.ts) is
 * still what allocateDepositAddress would give: the same precedence, account key, then a free
 * imported address, then (Test only) the built-in key.
 */
export function builtinStillApplies(owner: Owner, network: string): { sql: string; params: unknown[] } {
  const scope = [owner.merchantId, owner.environment, network];
  return {
    sql: `not exists (select 1 from address_sources where merchant_id = ? and environment = ? and network = ?)
          and not exists (select 1 from address_pool where merchant_id = ? and environment = ? and network = ? and leased_at is null)`,
    params: [...scope, ...scope],
  };
}

/** builtinStillApplies for several networks at once (one address for the EVM networks of one intent: reserve.ts takeShared). */
export function builtinStillAppliesTo(owner: Owner, networks: readonly string[]): { sql: string; params: unknown[] } {
  const list = `{${networks.join(",")}}`;
  return {
    sql: `not exists (select 1 from address_sources where merchant_id = ? and environment = ? and network = any(?::text[]))
          and not exists (select 1 from address_pool where merchant_id = ? and environment = ? and network = any(?::text[]) and leased_at is null)`,
    params: [owner.merchantId, owner.environment, list, owner.merchantId, owner.environment, list],
  };
}

/** Still the merchant's key, and the index below its next_index (a key set again resumes where it was). */
export function accountKeyStillApplies(owner: Owner, network: string, accountKey: string, index: number): { sql: string; params: unknown[] } {
  return {
    sql: `exists (select 1 from address_sources where merchant_id = ? and environment = ? and network = ? and account_key = ? and next_index > ?)`,
    params: [owner.merchantId, owner.environment, network, accountKey, index],
  };
}

/**
 * A new deposit address for an intent, in the create transaction and in one statement:
 * the merchant's account key for the network (the next index, taken under the source's
 * row lock), else its imported pool (a free address, SKIP LOCKED), else — Test only — the
 * built-in test key (nextval never blocks). Nothing to give → 409 deposit_address_unavailable.
 */
export async function allocateDepositAddress(tx: EntityManager, owner: Owner, network: string, intentId: string, at: Date): Promise<DepositAddress> {
  const sequence = testSequences[network];
  if (!sequence) throw new Error(`no test address sequence for ${network}`);
  const scope = [owner.merchantId, owner.environment, network];
  const [taken] = await tx.execute<{ account_key: string | null; source_index: number | null; pooled: string | null; test_index: number | null }[]>(
    `with source as (
       update address_sources set next_index = next_index + 1, updated_at = ?
        where merchant_id = ? and environment = ? and network = ?
       returning account_key, next_index - 1 as index
     ), pooled as (
       update address_pool set payment_intent_id = ?, leased_at = ?
        where id = (select id from address_pool where merchant_id = ? and environment = ? and network = ? and leased_at is null
                       and not exists (select 1 from source)
                     order by id limit 1 for update skip locked)
       returning address
     ), builtin as (
       select nextval('${sequence}')::int as index
        where ? = 'test' and not exists (select 1 from source) and not exists (select 1 from pooled)
     )
     select (select account_key from source), (select index from source) as source_index,
            (select address from pooled) as pooled, (select index from builtin) as test_index`,
    [at, ...scope, intentId, at, ...scope, owner.environment],
  );
  if (taken?.account_key != null && taken.source_index !== null) {
    return { address: deriveAddress(network, owner.environment, taken.account_key, taken.source_index), index: taken.source_index, kind: "account_key" };
  }
  if (taken?.pooled != null) return { address: taken.pooled, index: null, kind: "pool" };
  if (taken?.test_index != null) {
    const index = taken.test_index;
    return { address: builtinAddress(network, index), index, kind: "builtin" };
  }
  const [imported] = await tx.execute<{ n: number }[]>(
    `select count(*)::int as n from address_pool where merchant_id = ? and environment = ? and network = ?`,
    [owner.merchantId, owner.environment, network],
  );
  const admin = `npm run -s admin -- address`;
  const fix = supportsAccountKey(network)
    ? `set its account key with: ${admin}-source set --merchant ${owner.merchantId} --environment ${owner.environment} --network ${network} --xpub <account xpub>, or import addresses with: ${admin} import --merchant ${owner.merchantId} --environment ${owner.environment} --network ${network} --file <file>`
    : `import addresses with: ${admin} import --merchant ${owner.merchantId} --environment ${owner.environment} --network ${network} --file <file>`;
  throw apiError(
    "deposit_address_unavailable",
    (imported?.n ?? 0) > 0
      ? `Every imported ${network} deposit address is in use; ${fix}.`
      : `No ${network} deposit address source is set up for ${owner.environment}; ${fix}.`,
    "network",
  );
}
