import type { EntityManager } from "../platform/db.ts";
import type { CursorCodec } from "../platform/cursor.ts";
import { stillWatched, watchArgs, type TransactionFact, type WatchWindow } from "../intents/store.ts";
import type { IntentOutput, IntentOutputs } from "../intents/settle.ts";
import type { Environment } from "../auth/keys.ts";

/**
 * Reads and writes of chain_observations, the outputs to deposit addresses each chain showed:
 * the one owner of the table. A block output counts by its block's place on the best chain
 * (chain_blocks, blocks.ts); settlement (intents/settle.ts) reads them through intentOutputs.
 */

export interface ObservationInput {
  network: string;
  /** The chain is the network in this environment: Live's mainnet, Test's testnet or dev chain. */
  environment: Environment;
  asset: string;
  toAddress: string;
  txHash: string;
  outputIndex: number;
  amount: string;
  confirmations: number;
  blockHeight: number | null;
  blockHash: string | null;
  observedAt: Date;
}

export interface ObservationRow extends ObservationInput {
  id: number;
  paymentIntentId: string | null;
  orphaned: boolean;
  counted: boolean;
  countedLate: boolean;
  simulated: boolean;
  /** Seen in the node's mempool, in no block yet; orphaned too: withdrawn (it left the mempool unmined). */
  mempool: boolean;
  /** Its transaction signalled replace-by-fee (BIP 125) in the mempool. */
  replaceable: boolean;
  /** A fiat-priced intent's output of its asset: its value in the price currency when first seen. */
  fiatValue: string | null;
  createdAt: Date;
}

const columns = `id, network, environment, asset, to_address, tx_hash, output_index, amount::text as amount, confirmations, block_height,
  block_hash, observed_at, payment_intent_id, orphaned, counted, counted_late, simulated, mempool, replaceable, fiat_value::text as fiat_value, created_at`;

interface DbRow {
  id: string | number;
  network: string;
  environment: string;
  asset: string;
  to_address: string;
  tx_hash: string;
  output_index: number;
  amount: string;
  confirmations: number;
  block_height: string | number | null;
  block_hash: string | null;
  observed_at: Date | string;
  payment_intent_id: string | null;
  orphaned: boolean;
  counted: boolean;
  counted_late: boolean;
  simulated: boolean;
  mempool: boolean;
  replaceable: boolean;
  fiat_value: string | null;
  created_at: Date | string;
}

function fromDb(r: DbRow): ObservationRow {
  return {
    id: Number(r.id),
    network: r.network,
    environment: r.environment === "live" ? "live" : "test",
    asset: r.asset,
    toAddress: r.to_address,
    txHash: r.tx_hash,
    outputIndex: r.output_index,
    amount: r.amount,
    confirmations: r.confirmations,
    blockHeight: r.block_height === null ? null : Number(r.block_height),
    blockHash: r.block_hash,
    observedAt: new Date(r.observed_at),
    paymentIntentId: r.payment_intent_id,
    orphaned: r.orphaned,
    counted: r.counted,
    countedLate: r.counted_late,
    simulated: r.simulated,
    mempool: r.mempool,
    replaceable: r.replaceable,
    fiatValue: r.fiat_value,
    createdAt: new Date(r.created_at),
  };
}

export async function findObservation(em: EntityManager, network: string, environment: Environment, txHash: string, outputIndex: number): Promise<ObservationRow | undefined> {
  const rows = await em.execute<DbRow[]>(`select ${columns} from chain_observations where network = ? and environment = ? and tx_hash = ? and output_index = ?`, [
    network,
    environment,
    txHash,
    outputIndex,
  ]);
  return rows[0] && fromDb(rows[0]);
}

/**
 * Records an output, or updates the confirmations and block of one already recorded. In the
 * same block its confirmations never go down (a report from a watcher whose node lags says
 * nothing new); in another block (mined again after a reorg) they are the new block's. A report
 * is the watcher saying the block is on the best chain: an orphaned output reported again, in
 * another block or in its own block come back, counts again.
 */
export async function upsertObservation(em: EntityManager, o: ObservationInput, intentId: string | null, simulated: boolean, at: Date): Promise<ObservationRow> {
  const rows = await em.execute<DbRow[]>(
    `insert into chain_observations (network, environment, asset, to_address, tx_hash, output_index, amount, confirmations, block_height, block_hash,
       observed_at, payment_intent_id, simulated, created_at, updated_at)
     values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
     on conflict (network, environment, tx_hash, output_index) do update set
       confirmations = case when excluded.block_hash is not distinct from chain_observations.block_hash
         then greatest(chain_observations.confirmations, excluded.confirmations) else excluded.confirmations end,
       block_height = excluded.block_height, block_hash = excluded.block_hash,
       observed_at = excluded.observed_at,
       orphaned = false,
       updated_at = excluded.updated_at
     returning ${columns}`,
    [o.network, o.environment, o.asset, o.toAddress, o.txHash, o.outputIndex, o.amount, o.confirmations, o.blockHeight, o.blockHash, o.observedAt, intentId, simulated, at, at],
  );
  return fromDb(rows[0] as DbRow);
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

/** Saves what settlement decided for each output. */
export async function setCounted(em: EntityManager, changes: readonly { id: number; counted: boolean; countedLate: boolean }[], at: Date): Promise<void> {
  if (changes.length === 0) return;
  await em.execute(
    `update chain_observations o set counted = c.counted, counted_late = c.counted_late, updated_at = ?
       from json_to_recordset(?::json) as c(id bigint, counted boolean, counted_late boolean) where o.id = c.id`,
    [at, JSON.stringify(changes.map((c) => ({ id: c.id, counted: c.counted, counted_late: c.countedLate })))],
  );
}

/** Marks outputs as told to their merchant (payment.exception); returns those not told before. */
export async function setExceptionReported(em: EntityManager, ids: readonly number[], at: Date): Promise<number[]> {
  if (ids.length === 0) return [];
  const rows = await em.execute<{ id: string | number }[]>(
    `update chain_observations set exception_reported_at = ? where id = any(?::bigint[]) and exception_reported_at is null returning id`,
    [at, `{${ids.join(",")}}`],
  );
  return rows.map((r) => Number(r.id));
}

/** Fixes outputs' value in their intent's price currency, where none was fixed yet. */
export async function setFiatValues(em: EntityManager, values: readonly { id: number; value: string }[]): Promise<void> {
  if (values.length === 0) return;
  await em.execute(
    `update chain_observations o set fiat_value = v.value::numeric
       from json_to_recordset(?::json) as v(id bigint, value text) where o.id = v.id and o.fiat_value is null`,
    [JSON.stringify(values)],
  );
}

/** The intents with live outputs in the given blocks or transactions (to lock before orphaning). */
export async function intentsTouchedByReorg(em: EntityManager, network: string, environment: Environment, blockHashes: readonly string[], txHashes: readonly string[]): Promise<string[]> {
  const rows = await em.execute<{ payment_intent_id: string }[]>(
    `select distinct payment_intent_id from chain_observations
      where network = ? and environment = ? and not orphaned and payment_intent_id is not null and (block_hash = any(?::text[]) or tx_hash = any(?::text[]))`,
    [network, environment, `{${blockHashes.join(",")}}`, `{${txHashes.join(",")}}`],
  );
  return rows.map((r) => r.payment_intent_id);
}

/** Orphans the outputs of the given blocks or transactions; returns how many were live. */
export async function orphan(em: EntityManager, network: string, environment: Environment, blockHashes: readonly string[], txHashes: readonly string[], at: Date): Promise<number> {
  const rows = await em.execute<{ id: string }[]>(
    `update chain_observations set orphaned = true, updated_at = ?
      where network = ? and environment = ? and not orphaned and (block_hash = any(?::text[]) or tx_hash = any(?::text[])) returning id`,
    [at, network, environment, `{${blockHashes.join(",")}}`, `{${txHashes.join(",")}}`],
  );
  return rows.length;
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

/** What was reported of an output the core refused, as sent (cut to fit), and why. */
export interface Rejection {
  network: string;
  environment: Environment;
  txHash: string;
  outputIndex: number;
  asset: string;
  toAddress: string;
  amount: string;
  blockHash: string | null;
  reason: string;
}

const cut = (s: string, n: number) => (s.length > n ? `${s.slice(0, n - 1)}…` : s);

/** Keeps a refused output for operators: once per output, counting how often it was reported. */
export async function recordRejection(em: EntityManager, r: Rejection): Promise<void> {
  await em.execute(
    `insert into chain_rejected_observations (network, environment, tx_hash, output_index, asset, to_address, amount, block_hash, reason, first_at, last_at)
     values (?, ?, ?, ?, ?, ?, ?, ?, ?, now(), now())
     on conflict (network, environment, tx_hash, output_index) do update set
       reason = excluded.reason, amount = excluded.amount, block_hash = excluded.block_hash, last_at = now(),
       reports = chain_rejected_observations.reports + 1`,
    [r.network, r.environment, cut(r.txHash, 200), r.outputIndex, cut(r.asset, 32), cut(r.toAddress, 200), cut(r.amount, 200), r.blockHash && cut(r.blockHash, 200), cut(r.reason, 500)],
  );
}

/** Refused outputs for operators, the most recently reported first. */
export async function listRejections(em: EntityManager, limit: number) {
  return em.execute<
    { network: string; environment: string; tx_hash: string; output_index: number; asset: string; to_address: string; amount: string; block_hash: string | null; reason: string; reports: number; first_at: Date; last_at: Date }[]
  >(
    `select network, environment, tx_hash, output_index, asset, to_address, amount, block_hash, reason, reports, first_at, last_at
       from chain_rejected_observations order by last_at desc, tx_hash, output_index limit ?`,
    [limit],
  );
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
              case when o.asset <> i.asset then 'wrong_asset'
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

/** An output a watcher reported, with the intent whose deposit address it paid (null: none). */
export interface ReportedOutputRow {
  asset: string;
  toAddress: string;
  txHash: string;
  outputIndex: number;
  amount: string;
  intentId: string | null;
}

/** An output of a reported block. */
export interface BlockOutput extends ReportedOutputRow {
  blockHeight: number;
  blockHash: string;
  observedAt: Date;
}

/**
 * Records the outputs of reported blocks in one statement. An output already recorded is the
 * same output wherever its transaction is mined: it moves to the reported block and is live
 * again (its confirmations start over in a block it was not in). One recorded with another
 * address, asset or amount is left as it is and returned, for the caller to reject.
 */
export async function upsertBlockOutputs(em: EntityManager, chain: { network: string; environment: Environment }, outputs: readonly BlockOutput[], at: Date): Promise<BlockOutput[]> {
  if (outputs.length === 0) return [];
  const rows = await em.execute<{ tx_hash: string; output_index: number }[]>(
    `insert into chain_observations (network, environment, asset, to_address, tx_hash, output_index, amount, confirmations, block_height, block_hash,
       observed_at, payment_intent_id, simulated, created_at, updated_at)
     select ?, ?, o.asset, o.to_address, o.tx_hash, o.output_index, o.amount::numeric, 0, o.block_height, o.block_hash, o.observed_at, o.intent_id, false, ?, ?
       from json_to_recordset(?::json) as o(asset text, to_address text, tx_hash text, output_index int, amount text, block_height bigint, block_hash text, observed_at timestamptz, intent_id text)
     on conflict (network, environment, tx_hash, output_index) do update set
       confirmations = case when chain_observations.block_hash = excluded.block_hash then chain_observations.confirmations else 0 end,
       block_height = excluded.block_height, block_hash = excluded.block_hash, observed_at = excluded.observed_at,
       orphaned = false, mempool = false, updated_at = excluded.updated_at
       where chain_observations.asset = excluded.asset and chain_observations.to_address = excluded.to_address and chain_observations.amount = excluded.amount
     returning tx_hash, output_index`,
    [
      chain.network,
      chain.environment,
      at,
      at,
      JSON.stringify(
        outputs.map((o) => ({
          asset: o.asset,
          to_address: o.toAddress,
          tx_hash: o.txHash,
          output_index: o.outputIndex,
          amount: o.amount,
          block_height: o.blockHeight,
          block_hash: o.blockHash,
          observed_at: o.observedAt.toISOString(),
          intent_id: o.intentId,
        })),
      ),
    ],
  );
  const taken = new Set(rows.map((r) => `${r.tx_hash}:${r.output_index}`));
  return outputs.filter((o) => !taken.has(`${o.txHash}:${o.outputIndex}`));
}

/** The intents with outputs in the given blocks (to lock before their outputs change). */
export async function intentsInBlocks(em: EntityManager, chain: { network: string; environment: Environment }, blockHashes: readonly string[]): Promise<string[]> {
  if (blockHashes.length === 0) return [];
  const rows = await em.execute<{ payment_intent_id: string }[]>(
    `select distinct payment_intent_id from chain_observations where network = ? and environment = ? and block_hash = any(?::text[]) and payment_intent_id is not null`,
    [chain.network, chain.environment, `{${blockHashes.join(",")}}`],
  );
  return rows.map((r) => r.payment_intent_id);
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
 * The intents with an output of their own asset above `aboveHeight` that does not count yet but
 * has, at `tip`, the confirmations its intent needs (the intent's fixed count, else its asset's
 * default in `defaults`): the ones a tip moving up may settle.
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
      where o.network = ? and o.environment = ? and o.block_height > ? and not o.orphaned and not o.counted and o.asset = i.asset
        and ? - o.block_height + 1 >= coalesce(i.required_confirmations, (?::jsonb ->> i.asset)::int)`,
    [chain.network, chain.environment, aboveHeight, tip, JSON.stringify(defaults)],
  );
  return rows.map((r) => r.id);
}

/** The outputs of blocks that left the best chain stop counting (0 confirmations); those of blocks that came back are live again. */
export async function setOrphaned(em: EntityManager, chain: { network: string; environment: Environment }, blockHashes: readonly string[], orphaned: boolean, at: Date): Promise<number> {
  if (blockHashes.length === 0) return 0;
  const rows = await em.execute<{ id: string }[]>(
    `update chain_observations set orphaned = ?, confirmations = case when ? then 0 else confirmations end, updated_at = ?
      where network = ? and environment = ? and block_hash = any(?::text[]) and orphaned <> ? returning id`,
    [orphaned, orphaned, at, chain.network, chain.environment, `{${blockHashes.join(",")}}`, orphaned],
  );
  return rows.length;
}

/**
 * Derives confirmations from the best chain: an output in a best-chain block at or below the tip
 * has the tip's height minus its block's plus one. Only outputs above `aboveHeight` (deeper ones
 * have every confirmation they can need) and those of the blocks in `joined` (blocks that just
 * joined the best chain, however deep: a transaction mined again deep in a fork) are touched.
 */
export async function deriveConfirmations(
  em: EntityManager,
  chain: { network: string; environment: Environment },
  tip: number,
  aboveHeight: number,
  joined: readonly string[],
  at: Date,
): Promise<void> {
  await em.execute(
    `update chain_observations o set confirmations = ? - o.block_height + 1, updated_at = ?
       from chain_blocks b
      where o.network = ? and o.environment = ? and (o.block_height > ? or o.block_hash = any(?::text[])) and o.block_height <= ? and not o.orphaned
        and o.confirmations <> ? - o.block_height + 1
        and b.network = o.network and b.environment = o.environment and b.hash = o.block_hash and b.best`,
    [tip, at, chain.network, chain.environment, aboveHeight, `{${joined.join(",")}}`, tip, tip],
  );
}

/** An output of a mempool transaction. */
export interface MempoolOutputRow extends ReportedOutputRow {
  replaceable: boolean;
}

/**
 * Records the outputs of the node's mempool in one statement: new ones with no block and 0
 * confirmations; one recorded from the mempool before (withdrawn, and back: rebroadcast) is live
 * again, and so is one whose block left the best chain (its transaction went back to the
 * mempool); one missing from earlier reports and not withdrawn is no longer missing. One in a block of the best chain stays there: the mempool never moves it back. One
 * recorded with another address, asset or amount is left as it is and returned, for the caller
 * to reject. Also returns how many were new.
 */
export async function upsertMempoolOutputs(
  em: EntityManager,
  chain: { network: string; environment: Environment },
  outputs: readonly MempoolOutputRow[],
  at: Date,
): Promise<{ conflicting: MempoolOutputRow[]; added: number }> {
  if (outputs.length === 0) return { conflicting: [], added: 0 };
  const rows = await em.execute<{ tx_hash: string; output_index: number; added: boolean }[]>(
    `insert into chain_observations (network, environment, asset, to_address, tx_hash, output_index, amount, confirmations, block_height, block_hash,
       observed_at, payment_intent_id, simulated, mempool, replaceable, created_at, updated_at)
     select ?, ?, o.asset, o.to_address, o.tx_hash, o.output_index, o.amount::numeric, 0, null, null, ?, o.intent_id, false, true, o.replaceable, ?, ?
       from json_to_recordset(?::json) as o(asset text, to_address text, tx_hash text, output_index int, amount text, replaceable boolean, intent_id text)
     on conflict (network, environment, tx_hash, output_index) do update set
       confirmations = 0, block_height = null, block_hash = null, orphaned = false, mempool = true,
       replaceable = excluded.replaceable, mempool_absent_since = null, mempool_absent_reads = 0,
       updated_at = case when chain_observations.orphaned or chain_observations.replaceable <> excluded.replaceable
         then excluded.updated_at else chain_observations.updated_at end
       where chain_observations.asset = excluded.asset and chain_observations.to_address = excluded.to_address and chain_observations.amount = excluded.amount
         and not chain_observations.simulated
         and (chain_observations.mempool or chain_observations.orphaned)
         and (chain_observations.orphaned or chain_observations.replaceable <> excluded.replaceable or chain_observations.mempool_absent_reads > 0)
     returning tx_hash, output_index, (xmax = 0) as added`,
    [
      chain.network,
      chain.environment,
      at,
      at,
      at,
      JSON.stringify(
        outputs.map((o) => ({ asset: o.asset, to_address: o.toAddress, tx_hash: o.txHash, output_index: o.outputIndex, amount: o.amount, replaceable: o.replaceable, intent_id: o.intentId })),
      ),
    ],
  );
  const written = new Set(rows.map((r) => `${r.tx_hash}:${r.output_index}`));
  // Not written: already recorded as it is (in the mempool, or in a block), or recorded otherwise.
  const unwritten = outputs.filter((o) => !written.has(`${o.txHash}:${o.outputIndex}`));
  const conflicting: MempoolOutputRow[] = [];
  if (unwritten.length > 0) {
    const differ = await em.execute<{ tx_hash: string; output_index: number }[]>(
      `select c.tx_hash, c.output_index from chain_observations c
         join json_to_recordset(?::json) as o(asset text, to_address text, tx_hash text, output_index int, amount text)
           on c.tx_hash = o.tx_hash and c.output_index = o.output_index
        where c.network = ? and c.environment = ? and (c.asset <> o.asset or c.to_address <> o.to_address or c.amount <> o.amount::numeric)`,
      [JSON.stringify(unwritten.map((o) => ({ asset: o.asset, to_address: o.toAddress, tx_hash: o.txHash, output_index: o.outputIndex, amount: o.amount }))), chain.network, chain.environment],
    );
    const bad = new Set(differ.map((r) => `${r.tx_hash}:${r.output_index}`));
    conflicting.push(...unwritten.filter((o) => bad.has(`${o.txHash}:${o.outputIndex}`)));
  }
  return { conflicting, added: rows.filter((r) => r.added).length };
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

/** Counts one more report the outputs `ids` were missing from (the first: since `at`). Not a change of the payment: updated_at stays. */
export async function markAbsentFromMempool(em: EntityManager, ids: readonly number[], at: Date): Promise<void> {
  if (ids.length === 0) return;
  await em.execute(
    `update chain_observations set mempool_absent_reads = mempool_absent_reads + 1, mempool_absent_since = coalesce(mempool_absent_since, ?)
      where id = any(?::bigint[]) and mempool and not orphaned`,
    [at, `{${ids.join(",")}}`],
  );
}

/**
 * Withdraws the live mempool outputs `ids`: they left the mempool unmined (conflicted, replaced,
 * evicted). Returns how many.
 */
export async function withdrawFromMempool(em: EntityManager, ids: readonly number[], at: Date): Promise<number> {
  if (ids.length === 0) return 0;
  const rows = await em.execute<{ id: string }[]>(
    `update chain_observations set orphaned = true, mempool_absent_reads = mempool_absent_reads + 1, mempool_absent_since = coalesce(mempool_absent_since, ?), updated_at = ?
      where id = any(?::bigint[]) and mempool and not orphaned returning id`,
    [at, at, `{${ids.join(",")}}`],
  );
  return rows.length;
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
