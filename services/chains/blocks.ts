import type { EntityManager } from "../platform/db.ts";
import type { Chain } from "./store.ts";

/** Reads and writes of chain_blocks: the core's copy of each chain. */

export interface StoredBlock {
  height: number;
  hash: string;
}

/** How far below the tip blocks are kept: deeper than any count or reorg we follow (ChainService keeps at most 1 024 recent blocks). */
export const keptDepth = 2048;

/** The best chain's tip, or undefined when no block of the chain is stored. */
export async function bestTip(em: EntityManager, chain: Chain): Promise<StoredBlock | undefined> {
  const [row] = await em.execute<{ height: string | number; hash: string }[]>(
    `select height, hash from chain_blocks where network = ? and environment = ? and best order by height desc limit 1`,
    [chain.network, chain.environment],
  );
  return row && { height: Number(row.height), hash: row.hash };
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

/** Blocks that leave the best chain. */
export async function leaveBest(em: EntityManager, chain: Chain, hashes: readonly string[]): Promise<void> {
  if (hashes.length === 0) return;
  await em.execute(`update chain_blocks set best = false where network = ? and environment = ? and hash = any(?::text[])`, [chain.network, chain.environment, `{${hashes.join(",")}}`]);
}

/** Blocks that join the best chain: new ones stored, known ones (a branch coming back) marked best again. */
export async function joinBest(em: EntityManager, chain: Chain, blocks: readonly { height: number; hash: string; parentHash: string; time: Date | undefined }[], at: Date): Promise<void> {
  if (blocks.length === 0) return;
  await em.execute(
    `insert into chain_blocks (network, environment, hash, height, parent_hash, time, best, reported_at)
     select ?, ?, b.hash, b.height, b.parent_hash, b.time, true, ? from json_to_recordset(?::json) as b(hash text, height bigint, parent_hash text, time timestamptz)
     on conflict (network, environment, hash) do update set best = true, reported_at = excluded.reported_at`,
    [chain.network, chain.environment, at, JSON.stringify(blocks.map((b) => ({ hash: b.hash, height: b.height, parent_hash: b.parentHash, time: b.time?.toISOString() ?? null })))],
  );
}

/** Forgets blocks too deep to matter, and (a new chain) every block of the old one. */
export async function pruneBlocks(em: EntityManager, chain: Chain, belowHeight: number): Promise<void> {
  await em.execute(`delete from chain_blocks where network = ? and environment = ? and height < ?`, [chain.network, chain.environment, belowHeight]);
}

export async function forgetChain(em: EntityManager, chain: Chain): Promise<void> {
  await em.execute(`delete from chain_blocks where network = ? and environment = ?`, [chain.network, chain.environment]);
}
