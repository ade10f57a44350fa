import type { EntityManager } from "../platform/db.ts";
import { executePrepared } from "../platform/prepared.ts";
import { validationError } from "../platform/errors.ts";
import type { Environment } from "../auth/keys.ts";

/**
 * The only writer of chain_observations, the outputs to deposit addresses each chain showed.
 * Outputs come in three ways, and all go through here: an operator's watcher and the sandbox one
 * output at a time (observations/record.ts), the built-in watchers' blocks (report.ts) and their
 * mempool (mempool.ts). What they share is written once: how an output is inserted (writeOutputs),
 * that an output never changes (sameOutput), how one reported again where it was seen moves
 * there (placed), how outputs are orphaned and come back (setOrphaned). created_at and updated_at
 * are the caller's `at`: the database's clock read under the intents' locks (platform/db-clock.ts).
 * Reads are in outputs.ts.
 */

type Chain = { network: string; environment: Environment };

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
  /** Its value at the market's rate when it first counted (settle.ts); null without one. */
  fiatValueConfirmed: string | null;
  createdAt: Date;
}

/** The columns of an ObservationRow, as fromDb reads them. */
export const columns = `id, network, environment, asset, to_address, tx_hash, output_index, amount::text as amount, confirmations, block_height,
  block_hash, observed_at, payment_intent_id, orphaned, counted, counted_late, simulated, mempool, replaceable, fiat_value::text as fiat_value,
  fiat_value_confirmed::text as fiat_value_confirmed, created_at`;

export interface DbRow {
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
  fiat_value_confirmed: string | null;
  created_at: Date | string;
}

export function fromDb(r: DbRow): ObservationRow {
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
    fiatValueConfirmed: r.fiat_value_confirmed,
    createdAt: new Date(r.created_at),
  };
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
  /** Bitcoin: its transaction's bytes without witnesses, hex (ReportedOutput.raw_transaction). */
  rawTransaction?: string | undefined;
}

/** An output of a mempool transaction. */
export interface MempoolOutputRow extends ReportedOutputRow {
  replaceable: boolean;
}

/** An output as written: what it is, where and when it was seen, and how. */
interface OutputWrite extends ReportedOutputRow {
  confirmations: number;
  blockHeight: number | null;
  blockHash: string | null;
  observedAt: Date;
  simulated: boolean;
  mempool: boolean;
  replaceable: boolean;
  rawTransaction?: string | undefined;
}

/**
 * An output never changes: one recorded again must have the address, asset and amount it was
 * recorded with (`recorded` and `reported` name the two rows; amounts compare as numbers).
 */
const sameOutput = (recorded: string, reported: string) =>
  `${recorded}.asset = ${reported}.asset and ${recorded}.to_address = ${reported}.to_address and ${recorded}.amount = ${reported}.amount`;

/** Why an output recorded with another address, asset or amount is refused (validation_failed on tx_hash). */
export function outputChanged(o: { txHash: string; outputIndex: number }) {
  return validationError("tx_hash", `Output ${o.txHash}:${o.outputIndex} was recorded with another address, asset or amount; an output never changes.`);
}

/**
 * Writes outputs in one statement: a new one is recorded at `at`; one already recorded (an
 * output is its transaction and its place in it, wherever that is mined) is updated as
 * `onConflict` says, which also says what a report of it again may not change. Returns
 * `returning` of the rows written.
 */
async function writeOutputs<R>(em: EntityManager, chain: Chain, outputs: readonly OutputWrite[], at: Date, onConflict: string, returning: string): Promise<R[]> {
  return executePrepared<R>(
    em,
    `insert into chain_observations (network, environment, asset, to_address, tx_hash, output_index, amount, confirmations, block_height, block_hash,
       observed_at, payment_intent_id, simulated, mempool, replaceable, raw_transaction, created_at, updated_at)
     select ?::text, ?::text, o.asset, o.to_address, o.tx_hash, o.output_index, o.amount::numeric, o.confirmations, o.block_height, o.block_hash,
            o.observed_at, o.intent_id, o.simulated, o.mempool, o.replaceable, decode(o.raw_transaction, 'hex'), ?::timestamptz, ?::timestamptz
       from json_to_recordset(?::json) as o(asset text, to_address text, tx_hash text, output_index int, amount text, confirmations int, block_height bigint,
            block_hash text, observed_at timestamptz, intent_id text, simulated boolean, mempool boolean, replaceable boolean, raw_transaction text)
     on conflict (network, environment, tx_hash, output_index) do update set ${onConflict}
     returning ${returning}`,
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
          confirmations: o.confirmations,
          block_height: o.blockHeight,
          block_hash: o.blockHash,
          observed_at: o.observedAt.toISOString(),
          intent_id: o.intentId,
          simulated: o.simulated,
          mempool: o.mempool,
          replaceable: o.replaceable,
          raw_transaction: o.rawTransaction ?? null,
        })),
      ),
    ],
  );
}

/**
 * An output reported again where it was seen (an operator's report, a block of the best chain)
 * moves there and is live again: an orphaned one reported again, in another block or in its own
 * block come back, counts again, and one in a block is no longer in the mempool (an operator's
 * chain has no mempool rows: ObservationService refuses the chains a built-in watcher follows).
 * In the same block its confirmations never go down (a report from a watcher whose node lags
 * says nothing new); in another block (mined again after a reorg) they are the report's: an
 * operator's count, or a block's 0 until report.ts derives them from the best chain.
 */
const placed = `confirmations = case when excluded.block_hash is not distinct from chain_observations.block_hash
         then greatest(chain_observations.confirmations, excluded.confirmations) else excluded.confirmations end,
       block_height = excluded.block_height, block_hash = excluded.block_hash, observed_at = excluded.observed_at,
       raw_transaction = coalesce(chain_observations.raw_transaction, excluded.raw_transaction),
       orphaned = false, mempool = false, updated_at = excluded.updated_at
     where ${sameOutput("chain_observations", "excluded")}`;

/**
 * Records an output an operator's watcher (or the sandbox) reported, or moves one already
 * recorded where it was seen now (placed); one recorded with another address, asset or amount is
 * refused (outputChanged), changing nothing.
 */
export async function upsertObservation(em: EntityManager, o: ObservationInput, intentId: string | null, simulated: boolean, at: Date): Promise<ObservationRow> {
  const [row] = await writeOutputs<DbRow>(em, o, [{ ...o, intentId, simulated, mempool: false, replaceable: false }], at, placed, columns);
  if (!row) throw outputChanged(o);
  return fromDb(row);
}

/**
 * Records the outputs of reported blocks in one statement; one already recorded moves to the
 * reported block (placed). An output of a block in `best` (the blocks that join the best chain
 * with this report) is written with the confirmations its block has under `tip`, so that
 * deriveConfirmations finds it right and leaves it: writing each new output twice, once with none
 * and once with its count, was the largest cost of a catch-up (docs/performance.md). The others
 * have none until report.ts derives them. One recorded with another address, asset or amount is
 * left as it is and returned, for the caller to reject.
 */
export async function upsertBlockOutputs(
  em: EntityManager,
  chain: Chain,
  outputs: readonly BlockOutput[],
  best: { tip: number; blocks: ReadonlySet<string> },
  at: Date,
): Promise<BlockOutput[]> {
  if (outputs.length === 0) return [];
  const confirmations = (o: BlockOutput) => (best.blocks.has(o.blockHash) && o.blockHeight <= best.tip ? best.tip - o.blockHeight + 1 : 0);
  const rows = await writeOutputs<{ tx_hash: string; output_index: number }>(
    em,
    chain,
    outputs.map((o) => ({ ...o, confirmations: confirmations(o), simulated: false, mempool: false, replaceable: false })),
    at,
    placed,
    "tx_hash, output_index",
  );
  // placed writes every output it does not refuse: the others were recorded otherwise.
  const taken = new Set(rows.map((r) => `${r.tx_hash}:${r.output_index}`));
  return outputs.filter((o) => !taken.has(`${o.txHash}:${o.outputIndex}`));
}

/**
 * Records the outputs of the node's mempool in one statement: new ones with no block and 0
 * confirmations; one recorded from the mempool before (withdrawn, and back: rebroadcast) is live
 * again, and so is one whose block left the best chain (its transaction went back to the
 * mempool); one missing from earlier reports and not withdrawn is no longer missing. One in a
 * block of the best chain stays there: the mempool never moves it back (so its own update, not
 * placed), nor a simulated one. One recorded with another address, asset or amount is left as it
 * is and returned, for the caller to reject. Also returns how many were new.
 */
export async function upsertMempoolOutputs(em: EntityManager, chain: Chain, outputs: readonly MempoolOutputRow[], at: Date): Promise<{ conflicting: MempoolOutputRow[]; added: number }> {
  if (outputs.length === 0) return { conflicting: [], added: 0 };
  const rows = await writeOutputs<{ tx_hash: string; output_index: number; added: boolean }>(
    em,
    chain,
    outputs.map((o) => ({ ...o, confirmations: 0, blockHeight: null, blockHash: null, observedAt: at, simulated: false, mempool: true })),
    at,
    `confirmations = 0, block_height = null, block_hash = null, orphaned = false, mempool = true,
       replaceable = excluded.replaceable, mempool_absent_since = null, mempool_absent_reads = 0,
       updated_at = case when chain_observations.orphaned or chain_observations.replaceable <> excluded.replaceable
         then excluded.updated_at else chain_observations.updated_at end
     where ${sameOutput("chain_observations", "excluded")}
       and not chain_observations.simulated
       and (chain_observations.mempool or chain_observations.orphaned)
       and (chain_observations.orphaned or chain_observations.replaceable <> excluded.replaceable or chain_observations.mempool_absent_reads > 0)`,
    "tx_hash, output_index, (xmax = 0) as added",
  );
  const written = new Set(rows.map((r) => `${r.tx_hash}:${r.output_index}`));
  // Not written: already recorded as it is (in the mempool, or in a block), or recorded otherwise.
  const conflicting = await changedOf(em, chain, outputs.filter((o) => !written.has(`${o.txHash}:${o.outputIndex}`)));
  return { conflicting, added: rows.filter((r) => r.added).length };
}

/** Those of `outputs` recorded with another address, asset or amount (sameOutput refuses them). */
async function changedOf<O extends ReportedOutputRow>(em: EntityManager, chain: Chain, outputs: readonly O[]): Promise<O[]> {
  if (outputs.length === 0) return [];
  const differ = await executePrepared<{ tx_hash: string; output_index: number }>(
    em,
    `select c.tx_hash, c.output_index from chain_observations c
       join json_to_recordset(?::json) as o(asset text, to_address text, tx_hash text, output_index int, amount numeric)
         on c.tx_hash = o.tx_hash and c.output_index = o.output_index
      where c.network = ? and c.environment = ? and not (${sameOutput("c", "o")})`,
    [JSON.stringify(outputs.map((o) => ({ asset: o.asset, to_address: o.toAddress, tx_hash: o.txHash, output_index: o.outputIndex, amount: o.amount }))), chain.network, chain.environment],
  );
  const bad = new Set(differ.map((r) => `${r.tx_hash}:${r.output_index}`));
  return outputs.filter((o) => bad.has(`${o.txHash}:${o.outputIndex}`));
}

/** Outputs by where they were seen: in these blocks, or (an operator's reorg) of these transactions. */
export interface OutputPlaces {
  blocks: readonly string[];
  txs?: readonly string[];
}

/** The condition that picks the outputs of `places`, with its parameters; undefined when they name none. */
export function inPlaces(places: OutputPlaces): { sql: string; params: string[] } | undefined {
  const parts: { sql: string; list: readonly string[] }[] = [
    { sql: `block_hash = any(?::text[])`, list: places.blocks },
    { sql: `tx_hash = any(?::text[])`, list: places.txs ?? [] },
  ].filter((p) => p.list.length > 0);
  if (parts.length === 0) return undefined;
  return { sql: `(${parts.map((p) => p.sql).join(" or ")})`, params: parts.map((p) => `{${p.list.join(",")}}`) };
}

/**
 * Orphans the outputs of `places` (blocks that left the best chain; the blocks or transactions an
 * operator says were reorged out), or brings those of blocks that came back back; returns how
 * many changed. An orphaned output has 0 confirmations, as a watcher's are derived from the best
 * chain it left, except with `keepConfirmations`: an operator's are its own, told with each
 * observation, and an orphaned one keeps the last told (as the sandbox's reorg does, on any chain).
 */
export async function setOrphaned(em: EntityManager, chain: Chain, places: OutputPlaces, orphaned: boolean, at: Date, o: { keepConfirmations?: boolean } = {}): Promise<number> {
  const where = inPlaces(places);
  if (!where) return 0;
  const rows = await executePrepared<{ id: string }>(
    em,
    `update chain_observations set orphaned = ?, confirmations = case when ? then 0 else confirmations end, updated_at = ?
      where network = ? and environment = ? and ${where.sql} and orphaned <> ? returning id`,
    [orphaned, orphaned && o.keepConfirmations !== true, at, chain.network, chain.environment, ...where.params, orphaned],
  );
  return rows.length;
}

/**
 * Derives confirmations from the best chain: an output in a best-chain block at or below the tip
 * has the tip's height minus its block's plus one. Only outputs above `aboveHeight` (deeper ones
 * have every confirmation they can need) and those of the blocks in `joined` (blocks that just
 * joined the best chain, however deep: a transaction mined again deep in a fork) are touched.
 * The few blocks are listed first and their outputs then read by block hash, so the plan stays
 * right whatever the tables' statistics say. As a join, planned with statistics from when the
 * tables were empty (autovacuum off, or not yet run), PostgreSQL scanned every kept block for each
 * output (1.2 million rows for 3 000 outputs, 0.6 s a report, in the bench's third run; 9 s with
 * the blocks as a subquery) or, with the blocks as an array of the same statement, every output.
 */
export async function deriveConfirmations(em: EntityManager, chain: Chain, tip: number, aboveHeight: number, joined: readonly string[], at: Date): Promise<void> {
  const blocks = await executePrepared<{ hash: string; height: string | number }>(
    em,
    `select hash, height from chain_blocks where network = ? and environment = ? and best and height <= ? and (height > ? or hash = any(?::text[]))`,
    [chain.network, chain.environment, tip, aboveHeight, `{${joined.join(",")}}`],
  );
  if (blocks.length === 0) return;
  // Their heights bound the rows too, so that either index (by block or by height) reads only them.
  const lowest = Math.min(...blocks.map((b) => Number(b.height)));
  await executePrepared(
    em,
    `update chain_observations o set confirmations = ? - o.block_height + 1, updated_at = ?
      where o.network = ? and o.environment = ? and o.block_height between ? and ? and o.block_hash = any(?::text[])
        and not o.orphaned and o.confirmations <> ? - o.block_height + 1`,
    [tip, at, chain.network, chain.environment, lowest, tip, `{${blocks.map((b) => b.hash).join(",")}}`, tip],
  );
}

/** Counts one more report the outputs `ids` were missing from (the first: since `at`). Not a change of the payment: updated_at stays. */
export async function markAbsentFromMempool(em: EntityManager, ids: readonly number[], at: Date): Promise<void> {
  if (ids.length === 0) return;
  await executePrepared(
    em,
    `update chain_observations set mempool_absent_reads = mempool_absent_reads + 1, mempool_absent_since = coalesce(mempool_absent_since, ?)
      where id = any(?::bigint[]) and mempool and not orphaned`,
    [at, `{${ids.join(",")}}`],
  );
}

/**
 * Withdraws the live mempool outputs `ids`: they left the mempool unmined (conflicted, replaced,
 * evicted). Returns how many. An orphaning of its own, not setOrphaned's: by row, counting the
 * absence, and with no confirmations to take away.
 */
export async function withdrawFromMempool(em: EntityManager, ids: readonly number[], at: Date): Promise<number> {
  if (ids.length === 0) return 0;
  const rows = await executePrepared<{ id: string }>(
    em,
    `update chain_observations set orphaned = true, mempool_absent_reads = mempool_absent_reads + 1, mempool_absent_since = coalesce(mempool_absent_since, ?), updated_at = ?
      where id = any(?::bigint[]) and mempool and not orphaned returning id`,
    [at, at, `{${ids.join(",")}}`],
  );
  return rows.length;
}

/** Saves what settlement decided for each output. */
/**
 * Outputs' counted flags; `valueAtCount`, an output's value at the market's rate as it first
 * counts, is kept once (the first counting's: a reorg and a recount leave it as it was).
 */
export async function setCounted(
  em: EntityManager,
  changes: readonly { id: number; counted: boolean; countedLate: boolean; valueAtCount?: string | undefined }[],
  at: Date,
): Promise<void> {
  if (changes.length === 0) return;
  await executePrepared(
    em,
    `update chain_observations o set counted = c.counted, counted_late = c.counted_late, updated_at = ?,
            fiat_value_confirmed = coalesce(o.fiat_value_confirmed, c.value_at_count::numeric)
       from json_to_recordset(?::json) as c(id bigint, counted boolean, counted_late boolean, value_at_count text) where o.id = c.id`,
    [at, JSON.stringify(changes.map((c) => ({ id: c.id, counted: c.counted, counted_late: c.countedLate, value_at_count: c.valueAtCount ?? null })))],
  );
}

/** Marks outputs as told to their merchant (payment.exception); returns those not told before. */
export async function setExceptionReported(em: EntityManager, ids: readonly number[], at: Date): Promise<number[]> {
  if (ids.length === 0) return [];
  const rows = await executePrepared<{ id: string | number }>(
    em,
    `update chain_observations set exception_reported_at = ? where id = any(?::bigint[]) and exception_reported_at is null returning id`,
    [at, `{${ids.join(",")}}`],
  );
  return rows.map((r) => Number(r.id));
}

/** Fixes outputs' value in their intent's price currency, where none was fixed yet. */
export async function setFiatValues(em: EntityManager, values: readonly { id: number; value: string }[]): Promise<void> {
  if (values.length === 0) return;
  await executePrepared(
    em,
    `update chain_observations o set fiat_value = v.value::numeric
       from json_to_recordset(?::json) as v(id bigint, value text) where o.id = v.id and o.fiat_value is null`,
    [JSON.stringify(values)],
  );
}
