import type { Owner } from "../auth/keys.ts";
import type { EntityManager } from "../platform/db.ts";
import { deriveAddress, deriveChange, derivePublicKey, parseOriginText, testAccountKeys, testKeyOrigins, type KeyOrigin } from "./keys.ts";

/** Where a deposit address's key is in the merchant's wallet: what a PSBT input's BIP-32 derivation says. */
export interface AddressDerivation {
  publicKey: Uint8Array;
  fingerprint: string;
  /** The full path, e.g. "m/84'/0'/0'/0/7". */
  path: string;
  /** The same index on the key's change chain (…/1/7): where a PSBT spending this address returns its change. */
  change: { address: string; publicKey: Uint8Array; path: string };
}

/** Why an address has no derivation to give: no key derived it (an imported one), or its key's origin is unknown. */
export type NoDerivation = { missing: "key" | "origin" };

/**
 * The derivation of each of an owner's deposit addresses (with the index it was derived at) on a
 * network: the key that derived it is found among the source's current and former keys and, in
 * Test, the built-in one, by deriving again; its origin is what the merchant gave with it.
 */
export async function derivationsOf(
  em: EntityManager,
  owner: Owner,
  network: "bitcoin",
  addresses: readonly { address: string; index: number }[],
): Promise<Map<string, AddressDerivation | NoDerivation>> {
  const [source] = await em.execute<{ account_key: string; retired_keys: Record<string, number> | string; key_origins: Record<string, string> | string }[]>(
    `select account_key, retired_keys, key_origins from address_sources where merchant_id = ? and environment = ? and network = ?`,
    [owner.merchantId, owner.environment, network],
  );
  const parse = <T,>(v: T | string): T => (typeof v === "string" ? (JSON.parse(v) as T) : v);
  const keys: { key: string; origin: KeyOrigin | null }[] = [];
  if (source) {
    const origins = parse(source.key_origins);
    for (const key of [source.account_key, ...Object.keys(parse(source.retired_keys))]) {
      keys.push({ key, origin: origins[key] === undefined ? null : parseOriginText(origins[key]) });
    }
  }
  if (owner.environment === "test") keys.push({ key: testAccountKeys[network], origin: testKeyOrigins[network] ?? null });

  const found = new Map<string, AddressDerivation | NoDerivation>();
  for (const { address, index } of addresses) {
    const match = keys.find(({ key }) => deriveAddress(network, owner.environment, key, index) === address);
    if (!match) found.set(address, { missing: "key" });
    else if (!match.origin) found.set(address, { missing: "origin" });
    else {
      found.set(address, {
        publicKey: derivePublicKey(network, owner.environment, match.key, index),
        fingerprint: match.origin.fingerprint,
        path: `${match.origin.path}/0/${index}`,
        change: { ...deriveChange(network, owner.environment, match.key, index), path: `${match.origin.path}/1/${index}` },
      });
    }
  }
  return found;
}
