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

/**
 * Indices of a built-in Test key taken from the database at a time, at least: a refill follows
 * demand, up to maxBuiltinRefill (#refill). Derived on the derivation thread a block at a time.
 */
const builtinBlock = 64;
const maxBuiltinRefill = 1024;
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
    // The next create's address will come from the derivation thread: started now, the first
    // refill does not wait for it to load (Test only, and Solana's addresses need no thread).
    if (kind === "builtin" && owner.environment === "test" && network !== "solana") derivationThread.warm();
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
      stock = { ready: [], waiting: [], taken: 0, size: builtinBlock };
      this.#builtin.set(network, stock);
    }
    stock.taken++;
    // First come, first served: a create that waited for a refill is not overtaken by later ones.
    const next = stock.waiting.length === 0 ? stock.ready.shift() : undefined;
    // Refilled ahead of demand: the next block is taken and derived while this one is used.
    if (stock.ready.length < stock.size / 2 && !stock.refilling) this.#refill(em, network, sequence, stock);
    const taken = next ?? (await new Promise<Ready>((resolve, reject) => (stock.waiting.push({ resolve, reject }), this.#serve(stock))));
    return { ...taken, guard: builtinStillApplies(owner, network), release: () => this.#giveBack(stock, taken) };
  }

  /** Hands ready addresses to the creates waiting, in the order they asked. */
  #serve(stock: BuiltinStock): void {
    while (stock.waiting.length > 0 && stock.ready.length > 0) (stock.waiting.shift() as Waiter).resolve(stock.ready.shift() as Ready);
  }

  /** An address a statement did not use: to the first create waiting, else back to the front of the stock (no index is skipped). */
  #giveBack(stock: BuiltinStock, address: Ready): void {
    stock.ready.unshift(address);
    this.#serve(stock);
  }

  /**
   * Takes indices from the sequence in one statement and derives their addresses on the
   * derivation thread, a block of builtinBlock at a time (all asked for at once), each served as
   * it comes. The count follows demand: twice the takes since the last refill began, and one for
   * each create waiting (at least builtinBlock, at most maxBuiltinRefill), and the next refill
   * begins when half of it is left, so the stock lasts through a refill however long a busy
   * database and thread make it. While creates wait, refills follow one another.
   *
   * With a fixed block of 64 and three refills' patience, at a thousand creates a second the
   * stock ran out while a refill waited on a busy database, and a create that had waited for three
   * refills went to the transactional path, deriving its address on the event loop: 941 of a bench
   * run's creates, each slower and each slowing the others. Sized only to the creates waiting,
   * refills of 64 took 100 to 500 ms at 300 creates a second, and most creates waited for one.
   * A failed refill fails the creates waiting then (they take the transactional path, as any
   * refused create); the next take tries again.
   */
  #refill(em: EntityManager, network: string, sequence: string, stock: BuiltinStock): void {
    // Without the thread, every block is derived on the event loop: one block a refill, as before.
    const most = derivationThread.available ? maxBuiltinRefill : builtinBlock;
    const count = Math.min(most, Math.max(builtinBlock, 2 * stock.taken) + stock.waiting.length);
    stock.taken = 0;
    stock.size = count;
    stock.refilling = true;
    void (async () => {
      const rows = await executePrepared<{ index: number }>(em, `select nextval('${sequence}')::int as index from generate_series(1, ?)`, [count]);
      const indices = rows.map((r) => r.index);
      const blocks: number[][] = [];
      for (let i = 0; i < indices.length; i += builtinBlock) blocks.push(indices.slice(i, i + builtinBlock));
      // Asked for together: the thread derives them back to back, not one per turn of this loop.
      const derived = blocks.map((block) => derivationThread.derive(network, block));
      // Each is awaited in turn below; one that fails after an earlier one did is nobody's to handle.
      for (const d of derived) d.catch(() => undefined);
      for (const [n, block] of blocks.entries()) {
        const addresses = await (derived[n] as Promise<string[]>);
        rememberDerived(network, "test", addresses);
        stock.ready.push(...block.map((index, j) => ({ index, address: addresses[j] as string })));
        this.#serve(stock);
      }
    })()
      .catch((err: unknown) => {
        const error = err instanceof Error ? err : new Error(String(err));
        for (const w of stock.waiting.splice(0)) w.reject(error);
      })
      .finally(() => {
        stock.refilling = false;
        // Creates still waiting (more came than this refill took): another refill for them now.
        if (stock.waiting.length > 0) this.#refill(em, network, sequence, stock);
      });
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

interface Ready {
  index: number;
  address: string;
}

interface Waiter {
  resolve: (address: Ready) => void;
  reject: (err: Error) => void;
}

interface BuiltinStock {
  /** Reserved indices with their addresses, derived ahead. */
  ready: Ready[];
  /** Creates waiting for a refill, first come first. */
  waiting: Waiter[];
  /** Takes since the last refill began: the demand the next one is sized for. */
  taken: number;
  /** The last refill's count: the next begins when fewer than half of that are ready. */
  size: number;
  refilling?: boolean;
}

function scopeOf(owner: Owner, network: string): string {
  return `${owner.merchantId}|${owner.environment}|${network}`;
}
