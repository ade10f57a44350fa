import type { EntityManager } from "../platform/db.ts";
import type { Chain } from "./store.ts";

/** Reads and writes of chain_blocks: the core's copy of each chain. */

export interface StoredBlock {
  height: number;
  hash: string;
  /** The chain's work up to the block (bitcoin); undefined where branches are compared by height. */
  work?: bigint | undefined;
}

interface WorkRow {
  height: string | number;
  hash: string;
  work: string | null;
}

const storedOf = (r: WorkRow): StoredBlock => ({ height: Number(r.height), hash: r.hash, work: r.work === null ? undefined : BigInt(r.work) });

/**
 * How far below the tip blocks are kept: the deepest fork the core can find where it parts (the
 * watcher keeps as many), above every network's maximum reorg depth and any count a merchant sets.
 */
export const keptDepth = 2048;

/** The best chain's tip, or undefined when no block of the chain is stored. */
export async function bestTip(em: EntityManager, chain: Chain): Promise<StoredBlock | undefined> {
  const [row] = await em.execute<WorkRow[]>(
    `select height, hash, work from chain_blocks where network = ? and environment = ? and best order by height desc limit 1`,
    [chain.network, chain.environment],
  );
  return row && storedOf(row);
}

/** Every best-chain block's hash (a resumed chain that starts over leaves them all). */
export async function allBest(em: EntityManager, chain: Chain): Promise<string[]> {
  const rows = await em.execute<{ hash: string }[]>(`select hash from chain_blocks where network = ? and environment = ? and best order by height`, [chain.network, chain.environment]);
  return rows.map((r) => r.hash);
}

/** A kept side-branch block with the outputs reported in it. */
export interface SideBlock extends StoredBlock {
  outputs: unknown[];
}

/**
 * The side branch below a reported batch: kept blocks that are not best from just above the
 * best chain up to `parentHash`, lowest first; empty when that block is best; undefined when the
 * core keeps no such block, or the branch goes down further than it keeps blocks.
 */
export async function sideBranchTo(em: EntityManager, chain: Chain, parentHash: string): Promise<SideBlock[] | undefined> {
  const rows = await em.execute<(WorkRow & { best: boolean; side_outputs: unknown[] | null })[]>(
    `with recursive branch as (
       select hash, height, parent_hash, best, work, side_outputs, 0 as n from chain_blocks where network = ? and environment = ? and hash = ?
       union all
       select c.hash, c.height, c.parent_hash, c.best, c.work, c.side_outputs, b.n + 1
         from branch b join chain_blocks c on c.network = ? and c.environment = ? and c.hash = b.parent_hash
        where not b.best and b.n < ?
     )
     select hash, height, best, work, side_outputs from branch order by height`,
    [chain.network, chain.environment, parentHash, chain.network, chain.environment, keptDepth],
  );
  if (rows.length === 0 || !rows[0]?.best) return undefined;
  return rows.slice(1).map((r) => ({ ...storedOf(r), outputs: r.side_outputs ?? [] }));
}

/** The best chain's blocks from `from` up, by height. */
export async function bestFrom(em: EntityManager, chain: Chain, from: number): Promise<Map<number, string>> {
  const rows = await em.execute<{ height: string | number; hash: string }[]>(
    `select height, hash from chain_blocks where network = ? and environment = ? and best and height >= ? order by height`,
    [chain.network, chain.environment, from],
  );
  return new Map(rows.map((r) => [Number(r.height), r.hash]));
}

/** The best chain's newest `count` blocks, oldest first. */
export async function recentBest(em: EntityManager, chain: Chain, count: number): Promise<StoredBlock[]> {
  const rows = await em.execute<{ height: string | number; hash: string }[]>(
    `select height, hash from chain_blocks where network = ? and environment = ? and best order by height desc limit ?`,
    [chain.network, chain.environment, count],
  );
  return rows.map((r) => ({ height: Number(r.height), hash: r.hash })).reverse();
}

/** The best chain's newest `count` blocks below `beforeHeight`, oldest first (a watcher looking for where a deep fork parts). */
export async function bestBefore(em: EntityManager, chain: Chain, beforeHeight: number, count: number): Promise<StoredBlock[]> {
  const rows = await em.execute<{ height: string | number; hash: string }[]>(
    `select height, hash from chain_blocks where network = ? and environment = ? and best and height < ? order by height desc limit ?`,
    [chain.network, chain.environment, beforeHeight, count],
  );
  return rows.map((r) => ({ height: Number(r.height), hash: r.hash })).reverse();
}

/** Blocks that leave the best chain. */
export async function leaveBest(em: EntityManager, chain: Chain, hashes: readonly string[]): Promise<void> {
  if (hashes.length === 0) return;
  await em.execute(`update chain_blocks set best = false where network = ? and environment = ? and hash = any(?::text[])`, [chain.network, chain.environment, `{${hashes.join(",")}}`]);
}

/** A block as the core keeps it. */
export interface BlockRow {
  height: number;
  hash: string;
  parentHash: string;
  time: Date | undefined;
  work?: bigint | undefined;
}

const blockJson = (blocks: readonly (BlockRow & { outputs?: unknown[] })[]) =>
  JSON.stringify(
    blocks.map((b) => ({ hash: b.hash, height: b.height, parent_hash: b.parentHash, time: b.time?.toISOString() ?? null, work: b.work?.toString() ?? null, side_outputs: b.outputs ?? null })),
  );

/** Blocks that join the best chain: new ones stored, known ones (a branch coming back, or a side branch that won) marked best again. */
export async function joinBest(em: EntityManager, chain: Chain, blocks: readonly BlockRow[], at: Date): Promise<void> {
  if (blocks.length === 0) return;
  await em.execute(
    `insert into chain_blocks (network, environment, hash, height, parent_hash, time, work, best, reported_at)
     select ?, ?, b.hash, b.height, b.parent_hash, b.time, b.work, true, ? from json_to_recordset(?::json) as b(hash text, height bigint, parent_hash text, time timestamptz, work numeric)
     on conflict (network, environment, hash) do update set best = true, side_outputs = null, work = coalesce(excluded.work, chain_blocks.work), reported_at = excluded.reported_at`,
    [chain.network, chain.environment, at, blockJson(blocks)],
  );
}

/** Kept side-branch blocks that join the best chain with the batch above them. */
export async function rejoinBest(em: EntityManager, chain: Chain, hashes: readonly string[]): Promise<void> {
  if (hashes.length === 0) return;
  await em.execute(`update chain_blocks set best = true, side_outputs = null where network = ? and environment = ? and hash = any(?::text[])`, [
    chain.network,
    chain.environment,
    `{${hashes.join(",")}}`,
  ]);
}

/**
 * Blocks of a branch that does not beat the best chain yet, kept beside it with the outputs
 * reported in them: those are recorded when (if) the branch becomes best.
 */
export async function keepSide(em: EntityManager, chain: Chain, blocks: readonly (BlockRow & { outputs: unknown[] })[], at: Date): Promise<void> {
  if (blocks.length === 0) return;
  await em.execute(
    `insert into chain_blocks (network, environment, hash, height, parent_hash, time, work, best, side_outputs, reported_at)
     select ?, ?, b.hash, b.height, b.parent_hash, b.time, b.work, false, b.side_outputs, ?
       from json_to_recordset(?::json) as b(hash text, height bigint, parent_hash text, time timestamptz, work numeric, side_outputs jsonb)
     on conflict (network, environment, hash) do update set side_outputs = excluded.side_outputs, work = coalesce(excluded.work, chain_blocks.work), reported_at = excluded.reported_at
       where not chain_blocks.best`,
    [chain.network, chain.environment, at, blockJson(blocks)],
  );
}

/** Forgets blocks too deep to matter, and (a new chain) every block of the old one. */
export async function pruneBlocks(em: EntityManager, chain: Chain, belowHeight: number): Promise<void> {
  await em.execute(`delete from chain_blocks where network = ? and environment = ? and height < ?`, [chain.network, chain.environment, belowHeight]);
}

export async function forgetChain(em: EntityManager, chain: Chain): Promise<void> {
  await em.execute(`delete from chain_blocks where network = ? and environment = ?`, [chain.network, chain.environment]);
}
