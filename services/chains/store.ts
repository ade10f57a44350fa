import type { EntityManager } from "../platform/db.ts";

/** A chain: a network in an environment. */
export interface Chain {
  network: string;
  environment: string;
}

export interface BlockRef {
  height: number;
  hash: string;
}

export interface WatcherRow {
  holder: string;
  leaseExpiresAt: Date;
  height: number | null;
  recentBlocks: BlockRef[] | null;
  headHeight: number | null;
  headTime: Date | null;
  savedAt: Date | null;
}

interface DbRow {
  holder: string;
  lease_expires_at: Date;
  height: string | number | null;
  recent_blocks: BlockRef[] | null;
  head_height: string | number | null;
  head_time: Date | null;
  saved_at: Date | null;
}

const columns = "holder, lease_expires_at, height, recent_blocks, head_height, head_time, saved_at";

function fromDb(r: DbRow): WatcherRow {
  return {
    holder: r.holder,
    leaseExpiresAt: new Date(r.lease_expires_at),
    height: r.height === null ? null : Number(r.height),
    recentBlocks: r.recent_blocks,
    headHeight: r.head_height === null ? null : Number(r.head_height),
    headTime: r.head_time && new Date(r.head_time),
    savedAt: r.saved_at && new Date(r.saved_at),
  };
}

/**
 * Takes or renews the lease on following the chain: granted to its holder, or to anyone once
 * it lapsed (the database's clock decides, so watchers' clocks do not matter). One statement:
 * two watchers claiming at once cannot both win.
 */
export async function claimChain(em: EntityManager, chain: Chain, watcherId: string, leaseSeconds: number): Promise<{ active: boolean; row: WatcherRow }> {
  const [won] = await em.execute<DbRow[]>(
    `insert into chain_watchers (network, environment, holder, lease_expires_at)
     values (?, ?, ?, now() + make_interval(secs => ?))
     on conflict (network, environment) do update set holder = excluded.holder, lease_expires_at = excluded.lease_expires_at
       where chain_watchers.holder = excluded.holder or chain_watchers.lease_expires_at < now()
     returning ${columns}`,
    [chain.network, chain.environment, watcherId, leaseSeconds],
  );
  if (won) return { active: true, row: fromDb(won) };
  const [held] = await em.execute<DbRow[]>(`select ${columns} from chain_watchers where network = ? and environment = ?`, [chain.network, chain.environment]);
  return { active: false, row: fromDb(held as DbRow) };
}

/** Saves the position if `watcherId` still holds an unexpired lease; false when it does not. */
export async function savePosition(
  em: EntityManager,
  chain: Chain,
  watcherId: string,
  position: { height: number; recentBlocks: BlockRef[] },
  head: { height: number; time: Date | undefined },
): Promise<boolean> {
  const rows = await em.execute<{ holder: string }[]>(
    `update chain_watchers set height = ?, recent_blocks = ?::jsonb, head_height = ?, head_time = ?, saved_at = now()
      where network = ? and environment = ? and holder = ? and lease_expires_at > now()
      returning holder`,
    [position.height, JSON.stringify(position.recentBlocks), head.height, head.time ?? null, chain.network, chain.environment, watcherId],
  );
  return rows.length === 1;
}

/** Every chain's watcher row, for metrics and readiness. */
export async function listWatchers(em: EntityManager): Promise<(Chain & WatcherRow)[]> {
  const rows = await em.execute<(DbRow & Chain)[]>(`select network, environment, ${columns} from chain_watchers order by network, environment`);
  return rows.map((r) => ({ network: r.network, environment: r.environment, ...fromDb(r) }));
}
