import type { EntityManager } from "../platform/db.ts";
import type { CursorCodec } from "../platform/cursor.ts";
import { stillWatched, watchArgs, type TransactionFact, type WatchWindow } from "../intents/store.ts";
import type { IntentOutput, IntentOutputs } from "../intents/settle.ts";
import type { Environment } from "../auth/keys.ts";
import { columns, fromDb, inPlaces, setCounted, setExceptionReported, setFiatValues, type DbRow, type ObservationRow, type OutputPlaces } from "./output-store.ts";

/**
 * Reads of chain_observations, the outputs to deposit addresses each chain showed (output-store.ts
 * writes them). A block output counts by its block's place on the best chain (chain_blocks,
 * blocks.ts); settlement (intents/settle.ts) reads them, and keeps what counts, through intentOutputs.
 */

/**
 * The intents with outputs in `places`, to lock before those outputs change: with `liveOnly`,
 * only those of outputs not orphaned (what an operator's reorg orphans); else also orphaned ones
 * (report.ts: the blocks that leave the best chain and those that come back).
 */
export async function intentsWithOutputsIn(em: EntityManager, chain: { network: string; environment: Environment }, places: OutputPlaces, liveOnly: boolean): Promise<string[]> {
  const where = inPlaces(places);
  if (!where) return [];
  const rows = await em.execute<{ payment_intent_id: string }[]>(
    `select distinct payment_intent_id from chain_observations
      where network = ? and environment = ? and ${where.sql} and payment_intent_id is not null${liveOnly ? " and not orphaned" : ""}`,
    [chain.network, chain.environment, ...where.params],
  );
  return rows.map((r) => r.payment_intent_id);
}

/** An intent's outputs, oldest first. */
export async function observationsOf(em: EntityManager, intentId: string): Promise<ObservationRow[]> {
  const rows = await em.execute<DbRow[]>(`select ${columns} from chain_observations where payment_intent_id = ? order by created_at, id`, [intentId]);
  return rows.map(fromDb);
}

/** The outputs of several intents, each intent's oldest first. */
export async function observationsOfMany(em: EntityManager, intentIds: readonly string[]): Promise<Map<string, ObservationRow[]>> {
  const byIntent = new Map<string, ObservationRow[]>();
  if (intentIds.length === 0) return byIntent;
  const rows = await em.execute<DbRow[]>(`select ${columns} from chain_observations where payment_intent_id = any(?::text[]) order by created_at, id`, [`{${intentIds.join(",")}}`]);
  for (const r of rows.map(fromDb)) {
    const list = byIntent.get(r.paymentIntentId as string) ?? [];
    list.push(r);
    byIntent.set(r.paymentIntentId as string, list);
  }
  return byIntent;
}

/** Outputs of the given intents as the intents show them. */
export async function transactionsOf(em: EntityManager, intentIds: readonly string[]): Promise<Map<string, TransactionFact[]>> {
  const byIntent = new Map<string, TransactionFact[]>();
  if (intentIds.length === 0) return byIntent;
  const rows = await em.execute<DbRow[]>(
    `select ${columns} from chain_observations where payment_intent_id in (?) order by created_at, id`,
    [intentIds],
  );
  for (const r of rows.map(fromDb)) {
    const list = byIntent.get(r.paymentIntentId as string) ?? [];
    list.push(toFact(r));
    byIntent.set(r.paymentIntentId as string, list);
  }
  return byIntent;
}

export function toFact(r: ObservationRow): TransactionFact {
  return {
    network: r.network,
    txHash: r.txHash,
    outputIndex: r.outputIndex,
    amount: r.amount,
    confirmations: r.confirmations,
    blockHeight: r.blockHeight,
    counted: r.counted,
    simulated: r.simulated,
    asset: r.asset,
    orphaned: r.orphaned,
    mempool: r.mempool,
    replaceable: r.replaceable && r.mempool && !r.orphaned,
    fiatValue: r.fiatValue ?? undefined,
    fiatValueConfirmed: r.fiatValueConfirmed ?? undefined,
    recordedAt: r.createdAt,
    observedAt: r.observedAt,
  };
}

/** Unmatched outputs (an address of no intent), newest first, for ops. */
export async function listUnmatched(
  em: EntityManager,
  cursors: CursorCodec,
  q: { environment: Environment; network: string | undefined; cursor: string | undefined; limit: number },
): Promise<{ rows: ObservationRow[]; hasMore: boolean; nextCursor: string | undefined }> {
  const binding = JSON.stringify(["unmatched-observations", q.environment, q.network ?? null]);
  const after = cursors.start(binding, q.cursor);
  const where = ["payment_intent_id is null", "environment = ?"];
  const params: unknown[] = [q.environment];
  if (q.network !== undefined) {
    where.push("network = ?");
    params.push(q.network);
  }
  if (after) {
    where.push("(created_at, id) < (?, ?)");
    params.push(after.createdAt, after.id);
  }
  const rows = await em.execute<DbRow[]>(
    `select ${columns} from chain_observations where ${where.join(" and ")} order by created_at desc, id desc limit ?`,
    [...params, q.limit + 1],
  );
  const page = cursors.page(binding, rows.map(fromDb), q.limit, (r) => ({ createdAt: r.createdAt, id: String(r.id) }));
  return page;
}

/**
 * Payments that will never count for the intent they paid, the newest first, for operators: what
 * payment.exception told (or will tell, once confirmed) merchants, with its reason, decided as
 * funds.ts's exceptionReason decides it (`lateWindowSeconds`: LATE_PAYMENT_WINDOW_SECONDS).
 */
export async function listPaymentExceptions(em: EntityManager, o: { merchant?: string | undefined; limit: number; lateWindowSeconds: number }) {
  return em.execute<
    {
      id: string; payment_intent_id: string; merchant_id: string; environment: string; network: string; intent_asset: string; intent_status: string; reason: string;
      asset: string; amount: string; tx_hash: string; output_index: number; confirmations: number; observed_at: Date; exception_reported_at: Date | null;
    }[]
  >(
    `select * from (
       select o.id, o.payment_intent_id, i.merchant_id, o.environment, o.network, i.asset as intent_asset, i.status as intent_status,
              case when o.asset <> i.asset or o.network <> i.network then
                     case when i.methods @> jsonb_build_array(jsonb_build_object('network', o.network, 'asset', o.asset)) then 'other_method' else 'wrong_asset' end
                   when i.status = 'cancelled' then case when o.created_at > coalesce(i.cancelled_at, i.expires_at) then 'intent_cancelled' end
                   when least(o.created_at, o.observed_at) > i.expires_at + make_interval(secs => ?) then 'after_late_window' end as reason,
              o.asset, o.amount::text as amount, o.tx_hash, o.output_index, o.confirmations, o.observed_at, o.exception_reported_at
         from chain_observations o join payment_intents i on i.id = o.payment_intent_id
        where not o.orphaned and (?::text is null or i.merchant_id = ?)
     ) e where reason is not null
      order by observed_at desc, id desc limit ?`,
    [o.lateWindowSeconds, o.merchant ?? null, o.merchant ?? null, o.limit],
  );
}

/**
 * The intents with live outputs above `height` whose confirmations may change what counts: those
 * that do not count yet as the tip moves up, and (`counted`, after a fork) those that do.
 */
export async function intentsAwaitingConfirmations(em: EntityManager, chain: { network: string; environment: Environment }, aboveHeight: number, counted = false): Promise<string[]> {
  const rows = await em.execute<{ payment_intent_id: string }[]>(
    `select distinct payment_intent_id from chain_observations
      where network = ? and environment = ? and block_height > ? and not orphaned and (? or not counted) and payment_intent_id is not null`,
    [chain.network, chain.environment, aboveHeight, counted],
  );
  return rows.map((r) => r.payment_intent_id);
}

/**
 * The intents with an output of their own network and asset above `aboveHeight` that does not count
 * yet but has, at `tip`, the confirmations its intent needs (the intent's fixed count, else its
 * asset's default in `defaults`), or an output of another asset or method not yet told to the
 * merchant that has the confirmations to be (settle.ts exceptions): the ones a tip moving up may settle.
 */
export async function intentsReachingConfirmations(
  em: EntityManager,
  chain: { network: string; environment: Environment },
  tip: number,
  aboveHeight: number,
  defaults: Readonly<Record<string, number>>,
): Promise<string[]> {
  const rows = await em.execute<{ id: string }[]>(
    `select distinct i.id from chain_observations o join payment_intents i on i.id = o.payment_intent_id
       left join payment_intent_methods m on m.network = o.network and m.deposit_address = o.to_address
      where o.network = ? and o.environment = ? and o.block_height > ? and not o.orphaned and not o.counted
        and case when o.asset = i.asset and o.network = i.network
                 then ? - o.block_height + 1 >= coalesce(i.required_confirmations, (?::jsonb ->> i.asset)::int)
                 -- Not the intent's own: a payment.exception to tell once it has the confirmations its method (or the intent) needs.
                 else o.exception_reported_at is null and ? - o.block_height + 1 >= coalesce(m.required_confirmations, i.required_confirmations, (?::jsonb ->> i.asset)::int) end`,
    [chain.network, chain.environment, aboveHeight, tip, JSON.stringify(defaults), tip, JSON.stringify(defaults)],
  );
  return rows.map((r) => r.id);
}

/** A live mempool output missing from a report, with how long and how often it has been missing before it. */
export interface MissingMempoolOutput {
  id: number;
  intentId: string | null;
  txHash: string;
  /** When it was first missing from a report; null: it was in the last one. */
  absentSince: Date | null;
  /** Consecutive reports it was missing from before this one. */
  absentReads: number;
}

/**
 * The live mempool outputs not among `keep` (tx_hash:output_index): those a mempool report may
 * withdraw. Only those of intents still watched: a watcher reports outputs to watched addresses
 * only, so one of an intent cancelled or past its late-payment window is missing from the report
 * whether it left the mempool or not, and keeps what was last known of it.
 */
export async function missingFromMempool(
  em: EntityManager,
  chain: { network: string; environment: Environment },
  keep: readonly string[],
  watch: WatchWindow,
): Promise<MissingMempoolOutput[]> {
  const rows = await em.execute<{ id: string | number; payment_intent_id: string | null; tx_hash: string; mempool_absent_since: Date | string | null; mempool_absent_reads: number }[]>(
    `select id, payment_intent_id, tx_hash, mempool_absent_since, mempool_absent_reads from chain_observations o
      where network = ? and environment = ? and mempool and not orphaned
        and not (tx_hash || ':' || output_index = any(?::text[])) and ${watchedOrNone("o")}
      order by id`,
    [chain.network, chain.environment, `{${keep.join(",")}}`, ...watchArgs(watch)],
  );
  return rows.map((r) => ({
    id: Number(r.id),
    intentId: r.payment_intent_id,
    txHash: r.tx_hash,
    absentSince: r.mempool_absent_since === null ? null : new Date(r.mempool_absent_since),
    absentReads: r.mempool_absent_reads,
  }));
}

/** An output (`alias`) of no intent, or of one whose address the watchers still look for (stillWatched's two `?`). */
const watchedOrNone = (alias: string) =>
  `(${alias}.payment_intent_id is null or exists (select 1 from payment_intents p where p.id = ${alias}.payment_intent_id and ${stillWatched("p")}))`;

/** The outputs of intents as settlement reads them and keeps what counts. */
export const intentOutputs: IntentOutputs = {
  async of(tx, intentIds) {
    const rows = await observationsOfMany(tx, intentIds);
    return new Map([...rows].map(([id, list]) => [id, list.map((r): IntentOutput => ({ ...toFact(r), id: r.id, countedLate: r.countedLate }))]));
  },
  markCounted: setCounted,
  markExceptionReported: setExceptionReported,
  setFiatValues,
};
