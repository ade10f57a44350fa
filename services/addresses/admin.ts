import { UniqueConstraintViolationException } from "@mikro-orm/core";
import { AdminError } from "../auth/admin.ts";
import { Merchant } from "../auth/entities.ts";
import { isEnvironment, type Environment } from "../auth/keys.ts";
import type { EntityManager } from "../platform/db.ts";
import { networks } from "../vocabulary/assets.ts";
import { checkAddress } from "./formats.ts";
import { originText, parseAccountKey, SourceKeyError, splitKeyOrigin, testAccountKeys, type KeyOrigin } from "./keys.ts";

/** Deposit address sources of a merchant (admin CLI): account keys and imported address pools. */

async function requireMerchant(em: EntityManager, merchantId: string): Promise<void> {
  if (!(await em.findOne(Merchant, { id: merchantId }))) throw new AdminError(`no merchant ${merchantId}`);
}

function requireTarget(environment: string, network: string): void {
  if (!isEnvironment(environment)) throw new AdminError(`--environment must be test or live, got "${environment}"`);
  if (!networks.includes(network)) throw new AdminError(`unknown network "${network}"; one of: ${networks.join(", ")}`);
}

const testKeys = new Set<string>(Object.values(testAccountKeys));

/**
 * The account key as it will be stored and its origin, if given (`[d34db33f/84'/0'/0']zpub…`),
 * or AdminError. Needs no database, so the CLI calls it before starting one. Messages never
 * contain the key: a refused key may be a private one, and the message ends up in terminals and logs.
 */
export function checkAccountKey(environment: Environment, network: string, text: string): { key: string; origin: KeyOrigin | null } {
  requireTarget(environment, network);
  let parsed: { key: string; origin: KeyOrigin | null };
  try {
    const split = splitKeyOrigin(network, environment, text);
    parsed = { key: parseAccountKey(network, environment, split.key), origin: split.origin };
  } catch (error) {
    if (error instanceof SourceKeyError) throw new AdminError(error.message);
    throw error;
  }
  // Anyone can derive (and, from the public mnemonic, spend from) the Test keys' addresses.
  if (testKeys.has(parsed.key)) throw new AdminError("the built-in Test key is shared; give your own");
  return parsed;
}

interface SourceRow {
  account_key: string;
  next_index: number;
  updated_at: Date | string;
  /** The key's origin as stored ("d34db33f/84'/0'/0'"), if it was given. */
  key_origin: string | null;
}

/**
 * Sets the account key (text as checkAccountKey takes it). An origin given with it is kept beside
 * it, the key's for good: set again with one, a key gains it; set again without, it keeps it.
 */
export async function setAccountKey(em: EntityManager, merchantId: string, environment: Environment, network: string, text: string) {
  await requireMerchant(em, merchantId);
  const { key: accountKey, origin } = checkAccountKey(environment, network, text);
  const origins = JSON.stringify(origin ? { [accountKey]: originText(origin) } : {});
  const row = await em.transactional(async (tx) => {
    // Two sources deriving from one key would hand the same address to two intents.
    const [other] = await tx.execute<{ n: number }[]>(
      `select 1 as n from address_sources
        where (account_key = ? or jsonb_exists(retired_keys, ?)) and not (merchant_id = ? and environment = ? and network = ?) limit 1`,
      [accountKey, accountKey, merchantId, environment, network],
    );
    if (other) throw new AdminError("this key is already the source of another merchant or network: addresses would repeat");
    const now = new Date();
    // The same key again keeps its index (re-deriving from 0 would repeat addresses); a new key
    // starts at 0, and a key this source had before resumes where it stopped.
    const [changed] = await tx.execute<SourceRow[]>(
      `insert into address_sources (merchant_id, environment, network, account_key, next_index, created_at, updated_at, key_origins)
       values (?, ?, ?, ?, 0, ?, ?, ?::jsonb)
       on conflict (merchant_id, environment, network) do update
         set account_key = excluded.account_key,
             key_origins = address_sources.key_origins || excluded.key_origins,
             next_index = coalesce((address_sources.retired_keys ->> excluded.account_key)::int, 0),
             retired_keys = (address_sources.retired_keys - excluded.account_key)
                            || jsonb_build_object(address_sources.account_key, address_sources.next_index),
             updated_at = excluded.updated_at
         where address_sources.account_key <> excluded.account_key
       returning account_key, next_index, updated_at, key_origins ->> account_key as key_origin`,
      [merchantId, environment, network, accountKey, now, now, origins],
    );
    if (changed) return changed;
    // The same key again: only an origin given now changes anything.
    const [kept] = await tx.execute<SourceRow[]>(
      `update address_sources set key_origins = key_origins || ?::jsonb where merchant_id = ? and environment = ? and network = ?
       returning account_key, next_index, updated_at, key_origins ->> account_key as key_origin`,
      [origins, merchantId, environment, network],
    );
    if (!kept) throw new Error("address source vanished during its update");
    return kept;
  });
  return {
    merchant: merchantId,
    environment,
    network,
    account_key: row.account_key,
    key_origin: row.key_origin,
    next_index: Number(row.next_index),
    updated_at: new Date(row.updated_at).toISOString(),
  };
}

export async function showSources(em: EntityManager, merchantId: string) {
  await requireMerchant(em, merchantId);
  const keys = await em.execute<{ environment: string; network: string; account_key: string; next_index: number; key_origin: string | null }[]>(
    `select environment, network, account_key, next_index, key_origins ->> account_key as key_origin from address_sources where merchant_id = ? order by environment, network`,
    [merchantId],
  );
  const pools = await em.execute<{ environment: string; network: string; imported: number; free: number }[]>(
    `select environment, network, count(*)::int as imported, (count(*) filter (where leased_at is null))::int as free
       from address_pool where merchant_id = ? group by environment, network order by environment, network`,
    [merchantId],
  );
  return {
    merchant: merchantId,
    account_keys: keys.map((k) => ({ environment: k.environment, network: k.network, account_key: k.account_key, key_origin: k.key_origin, next_index: Number(k.next_index) })),
    pools: pools.map((p) => ({ environment: p.environment, network: p.network, imported: p.imported, free: p.free })),
  };
}

export interface ListedAddress {
  line: number;
  address: string;
}

/**
 * The normalized addresses of an import file (one a line; blank lines and "#" comments
 * skipped), or AdminError naming the first bad line. Needs no database, so the CLI
 * calls it before starting one. A bad line is not echoed: a pasted key could be on it.
 */
export function readAddressList(environment: Environment, network: string, text: string): ListedAddress[] {
  requireTarget(environment, network);
  const seen = new Map<string, number>();
  const list: ListedAddress[] = [];
  for (const [i, raw] of text.split(/\r?\n/).entries()) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    const check = checkAddress(network, environment, line);
    if (!check.ok) throw new AdminError(`line ${i + 1}: ${check.reason}`);
    // Compared normalized: the same address in two spellings (case, EIP-55) is still one address.
    const earlier = seen.get(check.address);
    if (earlier !== undefined) throw new AdminError(`line ${i + 1}: repeats line ${earlier}`);
    seen.set(check.address, i + 1);
    list.push({ line: i + 1, address: check.address });
  }
  if (list.length === 0) throw new AdminError("the file has no addresses");
  return list;
}

export async function importAddresses(em: EntityManager, merchantId: string, environment: Environment, network: string, text: string) {
  await requireMerchant(em, merchantId);
  const list = readAddressList(environment, network, text);
  const addresses = JSON.stringify(list.map((a) => a.address));
  const lineOf = (address: string) => list.find((a) => a.address === address)?.line ?? 0;
  try {
    return await em.transactional(async (tx) => {
      // An address leased twice, or also derived for an intent, would credit one payment to two intents.
      const pooled = await tx.execute<{ address: string }[]>(
        `select address from address_pool where network = ? and address in (select jsonb_array_elements_text(?::jsonb))`,
        [network, addresses],
      );
      const used = await tx.execute<{ address: string }[]>(
        `select deposit_address as address from payment_intents where network = ? and deposit_address in (select jsonb_array_elements_text(?::jsonb))`,
        [network, addresses],
      );
      const clash = [
        ...pooled.map((r) => ({ line: lineOf(r.address), why: "is already in an address pool" })),
        ...used.map((r) => ({ line: lineOf(r.address), why: "is already the deposit address of a payment intent" })),
      ].sort((a, b) => a.line - b.line)[0];
      if (clash) throw new AdminError(`line ${clash.line}: ${clash.why} on ${network}`);
      // In file order: the pool leases by id, so the file's first address is used first.
      await tx.execute(
        `insert into address_pool (merchant_id, environment, network, address, imported_at)
         select ?, ?, ?, a.value, ? from jsonb_array_elements_text(?::jsonb) with ordinality as a(value, n) order by a.n`,
        [merchantId, environment, network, new Date(), addresses],
      );
      const [free] = await tx.execute<{ n: number }[]>(
        `select count(*)::int as n from address_pool where merchant_id = ? and environment = ? and network = ? and leased_at is null`,
        [merchantId, environment, network],
      );
      return { merchant: merchantId, environment, network, imported: list.length, free: free?.n ?? 0 };
    });
  } catch (error) {
    if (error instanceof UniqueConstraintViolationException) {
      throw new AdminError("some of these addresses were imported by someone else meanwhile; run the import again to see which");
    }
    throw error;
  }
}
