import type { EntityManager } from "../platform/db.ts";

/** A chain: a network in an environment. */
export interface Chain {
  network: string;
  environment: string;
}

export interface WatcherRow {
  holder: string;
  leaseExpiresAt: Date;
  height: number | null;
  headHeight: number | null;
  headTime: Date | null;
  savedAt: Date | null;
  genesisHash: string | null;
  epoch: number;
  /** Why the chain counts nothing now (a fork deeper than its maximum), and how deep; null while it counts. */
  haltedReason: string | null;
  haltedDepth: number | null;
  /** The fork parts below every block known of the chain: it is at least haltedDepth deep. */
  haltedDepthIsLowerBound: boolean;
  /**
   * An operator's resume not spent yet (ops chain-resume): until when, and the lowest block of the
   * branch it was given for (null: a halt that named none). Null once spent or lapsed.
   */
  resume: { branchHeight: number | null; branchHash: string | null; until: Date } | null;
}

interface DbRow {
  holder: string;
  lease_expires_at: Date;
  height: string | number | null;
  head_height: string | number | null;
  head_time: Date | null;
  saved_at: Date | null;
  genesis_hash: string | null;
  epoch: string | number;
  halted_reason: string | null;
  halted_depth: number | null;
  halted_depth_is_lower_bound: boolean;
  resume_armed: boolean;
  accept_reorg_height: string | number | null;
  accept_reorg_hash: string | null;
  accept_reorg_until: Date | null;
}

const columns =
  "holder, lease_expires_at, height, head_height, head_time, saved_at, genesis_hash, epoch, halted_reason, halted_depth, halted_depth_is_lower_bound, " +
  "accept_reorg and accept_reorg_until > now() as resume_armed, accept_reorg_height, accept_reorg_hash, accept_reorg_until";

function fromDb(r: DbRow): WatcherRow {
  return {
    holder: r.holder,
    leaseExpiresAt: new Date(r.lease_expires_at),
    height: r.height === null ? null : Number(r.height),
    headHeight: r.head_height === null ? null : Number(r.head_height),
    headTime: r.head_time && new Date(r.head_time),
    savedAt: r.saved_at && new Date(r.saved_at),
    genesisHash: r.genesis_hash,
    epoch: Number(r.epoch),
    haltedReason: r.halted_reason,
    haltedDepth: r.halted_depth,
    haltedDepthIsLowerBound: r.halted_depth_is_lower_bound === true,
    resume:
      r.resume_armed === true && r.accept_reorg_until
        ? { branchHeight: r.accept_reorg_height === null ? null : Number(r.accept_reorg_height), branchHash: r.accept_reorg_hash, until: new Date(r.accept_reorg_until) }
        : null,
  };
}

/**
 * Takes or renews the lease on following the chain: granted to its holder under the credential
 * that claimed it, or to anyone once it lapsed (the database's clock decides, so watchers' clocks
 * do not matter). The winner's credential is kept with the lease: a report is admitted only under
 * it (lockAdmitted). The epoch moves whenever another watcher id or another credential takes the
 * chain. One statement: two watchers claiming at once cannot both win.
 */
export async function claimChain(em: EntityManager, chain: Chain, watcherId: string, credentialId: string, leaseSeconds: number): Promise<{ active: boolean; row: WatcherRow }> {
  const [won] = await em.execute<DbRow[]>(
    `insert into chain_watchers (network, environment, holder, credential_id, lease_expires_at)
     values (?, ?, ?, ?, now() + make_interval(secs => ?))
     on conflict (network, environment) do update set holder = excluded.holder, credential_id = excluded.credential_id, lease_expires_at = excluded.lease_expires_at,
       epoch = chain_watchers.epoch + (chain_watchers.holder <> excluded.holder or chain_watchers.credential_id is distinct from excluded.credential_id)::int
       where (chain_watchers.holder = excluded.holder and chain_watchers.credential_id = excluded.credential_id) or chain_watchers.lease_expires_at < now()
     returning ${columns}`,
    [chain.network, chain.environment, watcherId, credentialId, leaseSeconds],
  );
  if (won) return { active: true, row: fromDb(won) };
  const [held] = await em.execute<DbRow[]>(`select ${columns} from chain_watchers where network = ? and environment = ?`, [chain.network, chain.environment]);
  return { active: false, row: fromDb(held as DbRow) };
}

/** How long a watcher's word on its node is kept: a process gone for a day says nothing more. */
const reportKeptSeconds = 86_400;

/** Records what a watcher says of its node (problem null: it follows it), and forgets reports long gone stale. */
export async function reportNode(em: EntityManager, chain: Chain, watcherId: string, node: string, problem: string | null): Promise<void> {
  await em.execute(
    `insert into chain_node_reports (network, environment, watcher_id, node, problem, reported_at) values (?, ?, ?, ?, ?, now())
     on conflict (network, environment, watcher_id) do update set node = excluded.node, problem = excluded.problem, reported_at = excluded.reported_at`,
    [chain.network, chain.environment, watcherId, node, problem],
  );
  await em.execute(`delete from chain_node_reports where reported_at < now() - make_interval(secs => ?)`, [reportKeptSeconds]);
}

/**
 * The networks of an environment whose watchers reported, within `withinSeconds`, that they do not
 * follow their node: which ones only (for merchants' readiness), never the node or the words.
 */
export async function networksWithNodeProblems(em: EntityManager, environment: string, withinSeconds: number): Promise<string[]> {
  const rows = await em.execute<{ network: string }[]>(
    `select distinct network from chain_node_reports
      where environment = ? and problem is not null and reported_at > now() - make_interval(secs => ?)
      order by network`,
    [environment, withinSeconds],
  );
  return rows.map((r) => r.network);
}

/** What each watcher last said of its node (operators only: ops chains), newest first within a chain. */
export async function nodeReports(em: EntityManager): Promise<(Chain & { watcherId: string; node: string; problem: string | null; reportedAt: Date })[]> {
  const rows = await em.execute<{ network: string; environment: string; watcher_id: string; node: string; problem: string | null; reported_at: Date | string }[]>(
    `select network, environment, watcher_id, node, problem, reported_at from chain_node_reports order by network, environment, reported_at desc`,
  );
  return rows.map((r) => ({ network: r.network, environment: r.environment, watcherId: r.watcher_id, node: r.node, problem: r.problem, reportedAt: new Date(r.reported_at) }));
}

/** Every chain's watcher row, for metrics and readiness. */
export async function listWatchers(em: EntityManager): Promise<(Chain & WatcherRow)[]> {
  const rows = await em.execute<(DbRow & Chain)[]>(`select network, environment, ${columns} from chain_watchers order by network, environment`);
  return rows.map((r) => ({ network: r.network, environment: r.environment, ...fromDb(r) }));
}

/**
 * Whether a built-in watcher speaks for the chain: one has ever claimed it (its chain_watchers
 * row), whatever its lease now. Read FOR SHARE in the caller's transaction, so that no first claim
 * slips in before it commits. A lapsed lease (a node down, a deploy) does not hand the chain to
 * ObservationService: one source of chain truth per chain, for good.
 */
export async function chainFollowed(em: EntityManager, chain: Chain): Promise<boolean> {
  const [row] = await em.execute<{ one: number }[]>(`select 1 as one from chain_watchers where network = ? and environment = ? for share`, [chain.network, chain.environment]);
  return row !== undefined;
}

/**
 * How long a resume waits to be spent, unless the operator says (ops chain-resume --lapse-seconds):
 * the watcher goes on within a poll of it, so one not taken in an hour is a watcher that was down
 * or a node that moved on, and whatever it reports next was not what the operator looked at. It
 * stops the chain again, for another look.
 */
export const resumeLapseSeconds = 3_600;

/**
 * An operator's word that a stopped chain may go on (ops chain-resume): the halt is lifted, and
 * the fork that stopped it (the branch holding its lowest block) is taken whatever its depth, once.
 * The resume is spent when the best chain next changes, by that fork or by blocks that go on
 * without it (the watcher put back on a node on the kept chain), and lapses after
 * `lapseSeconds`: a later deep fork stops the chain again (report.ts). Returns the halt lifted;
 * undefined when the chain was not stopped.
 */
export async function resumeChain(
  em: EntityManager,
  chain: Chain,
  lapseSeconds = resumeLapseSeconds,
): Promise<{ depth: number | null; depthIsLowerBound: boolean; reason: string; branchHeight: number | null; branchHash: string | null; until: Date } | undefined> {
  const [row] = await em.execute<
    { halted_depth: number | null; halted_depth_is_lower_bound: boolean; halted_reason: string; halted_branch_height: string | number | null; halted_branch_hash: string | null; until: Date }[]
  >(
    `update chain_watchers w set halted_depth = null, halted_depth_is_lower_bound = false, halted_at = null, halted_reason = null, halted_branch_height = null, halted_branch_hash = null,
            accept_reorg = true, accept_reorg_height = prior.halted_branch_height, accept_reorg_hash = prior.halted_branch_hash, accept_reorg_until = now() + make_interval(secs => ?)
       from (select halted_depth, halted_depth_is_lower_bound, halted_reason, halted_branch_height, halted_branch_hash from chain_watchers where network = ? and environment = ? for update) prior
      where w.network = ? and w.environment = ? and prior.halted_reason is not null
      returning prior.halted_depth, prior.halted_depth_is_lower_bound, prior.halted_reason, prior.halted_branch_height, prior.halted_branch_hash, w.accept_reorg_until as until`,
    [lapseSeconds, chain.network, chain.environment, chain.network, chain.environment],
  );
  return (
    row && {
      depth: row.halted_depth,
      depthIsLowerBound: row.halted_depth_is_lower_bound === true,
      reason: row.halted_reason,
      branchHeight: row.halted_branch_height === null ? null : Number(row.halted_branch_height),
      branchHash: row.halted_branch_hash,
      until: new Date(row.until),
    }
  );
}
