import type { Owner } from "../auth/keys.ts";
import type { EntityManager } from "../platform/db.ts";
import { setBounded } from "../platform/bounded.ts";
import { executePrepared } from "../platform/prepared.ts";
import { derivationThread } from "./derivation.ts";
import { rememberDerived } from "./payment-uri.ts";
import { deriveAddress } from "./keys.ts";
import { accountKeyStillApplies, builtinStillApplies, builtinStillAppliesTo, testSequences, type AllocationKind } from "./allocate.ts";
import { isEvmNetwork } from "../vocabulary/assets.ts";

/**
 * A deposit address taken ahead of the statement that uses it, with the SQL condition under
 * which it is still the address the allocation rules would give (`guard`, to be AND-ed into
 * that statement): a create in one statement must know its address before it runs.
 */
export interface ReservedAddress {
  address: string;
  index: number;
  guard: { sql: string; params: unknown[] };
  /** Returns it to the reserve it came from, when a statement did not use it (it wrote nothing), so that no index is skipped. */
  readonly release: () => void;
}

/** Indices taken from the database at a time: the built-in Test keys' sequences, and an account key's next_index. */
const builtinBlock = 64;
/**
 * One for a merchant's own account key, taken just before the create's statement: next_index
 * stays the count of addresses handed out (which the merchant sees in address-source show), and
 * a wallet never meets a gap of indices a process took ahead and never used. That create costs
 * two statements instead of one, still without a transaction to open.
 */
const sourceBlock = 1;
const maxScopes = 2_000;

/**
 * Address indices reserved by this process, so that the common create needs no allocation
 * statement of its own. Only the allocations whose address can be reserved ahead are kept:
 * the built-in Test keys (one shared sequence per key, a block at a time) and a
 * merchant's account key (next_index, one at a time); an imported pool is leased in the create's
 * transaction, as before. Which kind a merchant's network uses is learnt from its last
 * transactional allocation, and the guard re-checks it in the statement, so a source set or
 * a pool imported since sends the create back to the transactional path.
 */
export class AddressReserve {
  #kinds = new Map<string, AllocationKind>();
  #builtin = new Map<string, BuiltinStock>();
  #sources = new Map<string, { key: string; indices: number[] }>();

  /** Records how the last transactional allocation for this merchant's network went. */
  learn(owner: Owner, network: string, kind: AllocationKind): void {
    const scope = scopeOf(owner, network);
    // Deleted first, so that a merchant still creating counts as the newest entry.
    this.#kinds.delete(scope);
    setBounded(this.#kinds, scope, kind, maxScopes);
    if (kind !== "account_key") this.#sources.delete(scope);
  }

  /** Forgets what was learnt (a guard failed): the next create allocates in its transaction. */
  forget(owner: Owner, network: string): void {
    const scope = scopeOf(owner, network);
    this.#kinds.delete(scope);
    this.#sources.delete(scope);
  }

  /** A reserved address for this merchant's network, or undefined when only the transactional path can allocate. */
  async take(em: EntityManager, owner: Owner, network: string): Promise<ReservedAddress | undefined> {
    const scope = scopeOf(owner, network);
    const kind = this.#kinds.get(scope);
    if (kind === "builtin" && owner.environment === "test") return this.#takeBuiltin(em, owner, network);
    if (kind === "account_key") return this.#takeSource(em, owner, network, scope);
    return undefined;
  }

  /**
   * One reserved built-in Test address for several EVM networks of one intent: their built-in key
   * and its index sequence are one (allocate.ts testSequences), so an index is one address on every
   * EVM chain, and one index serves them all (the watchers tell the payments apart by chain and
   * asset). Only when each of them takes built-in addresses here; its guard holds while all still do.
   * Undefined otherwise: each network takes its own.
   */
  async takeShared(em: EntityManager, owner: Owner, networks: readonly string[]): Promise<ReservedAddress | undefined> {
    const [first] = networks;
    if (owner.environment !== "test" || !first || networks.length < 2) return undefined;
    if (!networks.every((n) => isEvmNetwork(n) && this.#kinds.get(scopeOf(owner, n)) === "builtin")) return undefined;
    const taken = await this.#takeBuiltin(em, owner, first);
    return taken && { ...taken, guard: builtinStillAppliesTo(owner, networks) };
  }

  async #takeBuiltin(em: EntityManager, owner: Owner, network: string): Promise<ReservedAddress | undefined> {
    const sequence = testSequences[network];
    if (!sequence) return undefined;
    let stock = this.#builtin.get(network);
    if (!stock) {
      stock = { ready: [] };
      this.#builtin.set(network, stock);
    }
    for (let waits = 0; ; waits++) {
      // Refilled ahead of demand: the next block is derived while this one is used.
      if (stock.ready.length < builtinBlock / 2 && !stock.refill) stock.refill = this.#refill(em, network, sequence, stock);
      const next = stock.ready.shift();
      if (next) {
        const ready = stock.ready;
        return { ...next, guard: builtinStillApplies(owner, network), release: () => ready.unshift(next) };
      }
      if (waits >= 3) throw new Error(`no built-in ${network} addresses after ${waits} refills`);
      await stock.refill;
      if (stock.ready.length === 0 && stock.error) {
        const err = stock.error;
        stock.error = undefined;
        throw err;
      }
    }
  }

  /** Takes a block of indices from the sequence and derives their addresses on the derivation thread; never rejects. */
  #refill(em: EntityManager, network: string, sequence: string, stock: BuiltinStock): Promise<void> {
    return (async () => {
      const rows = await executePrepared<{ index: number }>(em, `select nextval('${sequence}')::int as index from generate_series(1, ?)`, [builtinBlock]);
      const indices = rows.map((r) => r.index);
      const addresses = await derivationThread.derive(network, indices);
      rememberDerived(network, "test", addresses);
      stock.ready.push(...indices.map((index, i) => ({ index, address: addresses[i] as string })));
    })()
      .then(
        () => undefined,
        (err: unknown) => void (stock.error = err instanceof Error ? err : new Error(String(err))),
      )
      .finally(() => (stock.refill = undefined));
  }

  async #takeSource(em: EntityManager, owner: Owner, network: string, scope: string): Promise<ReservedAddress | undefined> {
    let source = this.#sources.get(scope);
    if (!source || source.indices.length === 0) {
      const [row] = await executePrepared<{ account_key: string; first: number }>(
        em,
        `update address_sources set next_index = next_index + ?, updated_at = now()
          where merchant_id = ? and environment = ? and network = ?
         returning account_key, next_index - ? as first`,
        [sourceBlock, owner.merchantId, owner.environment, network, sourceBlock],
      );
      if (!row) {
        this.forget(owner, network);
        return undefined;
      }
      const fresh = Array.from({ length: sourceBlock }, (_, i) => row.first + i);
      // A concurrent refill of the same key keeps both blocks: none of their indices is skipped.
      const current = this.#sources.get(scope);
      if (current?.key === row.account_key) {
        current.indices.push(...fresh);
        source = current;
      } else {
        source = { key: row.account_key, indices: fresh };
        this.#sources.set(scope, source);
      }
    }
    const index = source.indices.shift() as number;
    const key = source.key;
    const address = deriveAddress(network, owner.environment, key, index);
    rememberDerived(network, owner.environment, [address]);
    return {
      address,
      index,
      guard: accountKeyStillApplies(owner, network, key, index),
      // Back to its key's indices, unless the key was replaced meanwhile (then the index stays unused).
      release: () => {
        const current = this.#sources.get(scope);
        if (current?.key === key) current.indices.unshift(index);
      },
    };
  }
}

interface BuiltinStock {
  /** Reserved indices with their addresses, derived ahead. */
  ready: { index: number; address: string }[];
  refill?: Promise<void>;
  /** Why the last refill failed, for the next take that finds nothing ready. */
  error?: Error;
}

function scopeOf(owner: Owner, network: string): string {
  return `${owner.merchantId}|${owner.environment}|${network}`;
}
