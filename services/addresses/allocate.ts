import type { Owner } from "../auth/keys.ts";
import type { EntityManager } from "../platform/db.ts";
import { apiError } from "../platform/errors.ts";
import { deriveAddress, supportsAccountKey, testAccountKeys, testSolanaAddress } from "./keys.ts";

export interface DepositAddress {
  address: string;
  /** The derivation index, when derived from an account key. */
  index: number | null;
}

/** The built-in Test keys share one index sequence per network (see the migration). */
const testSequences: Record<string, string> = {
  bitcoin: "test_address_index_bitcoin",
  ethereum: "test_address_index_ethereum",
  tron: "test_address_index_tron",
  solana: "test_address_index_solana",
  polygon: "test_address_index_polygon",
};

/**
 * A new deposit address for an intent, in the create transaction: the merchant's
 * account key for the network (the next index, taken under the source's row lock),
 * else its imported pool (a free address, SKIP LOCKED), else — Test only — the
 * built-in test key. Nothing to give → 409 deposit_address_unavailable.
 */
export async function allocateDepositAddress(tx: EntityManager, owner: Owner, network: string, intentId: string, at: Date): Promise<DepositAddress> {
  const [source] = await tx.execute<{ account_key: string; index: number }[]>(
    `update address_sources set next_index = next_index + 1, updated_at = ?
      where merchant_id = ? and environment = ? and network = ?
     returning account_key, next_index - 1 as index`,
    [at, owner.merchantId, owner.environment, network],
  );
  if (source) return { address: deriveAddress(network, owner.environment, source.account_key, source.index), index: source.index };

  const [pooled] = await tx.execute<{ address: string }[]>(
    `update address_pool set payment_intent_id = ?, leased_at = ?
      where id = (select id from address_pool where merchant_id = ? and environment = ? and network = ? and leased_at is null
                   order by id limit 1 for update skip locked)
     returning address`,
    [intentId, at, owner.merchantId, owner.environment, network],
  );
  if (pooled) return { address: pooled.address, index: null };

  if (owner.environment === "test") {
    const sequence = testSequences[network];
    if (!sequence) throw new Error(`no test address sequence for ${network}`);
    const [{ index } = { index: 0 }] = await tx.execute<{ index: number }[]>(`select nextval('${sequence}')::int as index`);
    const address =
      network === "solana" ? testSolanaAddress(index) : deriveAddress(network, "test", testAccountKeys[network as keyof typeof testAccountKeys], index);
    return { address, index };
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
