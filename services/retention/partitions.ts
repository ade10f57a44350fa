import type { RetentionSettings } from "../platform/config.ts";
import type { EntityManager } from "../platform/db.ts";
import { withSession, type Session } from "../platform/prepared.ts";
import { parseBound } from "../platform/time-partitions.ts";
import { unfinishedSql as unfinished } from "../events/retention.ts";

/**
 * The webhook tables partitioned by day (Migration20261128230000_TimePartitions): `<table>_legacy`
 * holds every row from before the cutover, then one partition per UTC day, `<table>_pYYYYMMDD`.
 * Partitions are made a week ahead, by every process (an insert with no partition for its day
 * fails); retention detaches and drops a day once all of it is past EVENT_RETENTION and none of its
 * rows is still needed: none is of an event a delivery not ended keeps (docs/webhooks.md and
 * docs/operations.md, "Retention").
 */

export const partitionedTables = [
  // Each table and its partition key: attempts go by their delivery's time.
  { table: "webhook_events", key: "created_at" },
  { table: "webhook_deliveries", key: "created_at" },
  { table: "webhook_attempts", key: "delivery_time" },
] as const;
export type PartitionedTable = (typeof partitionedTables)[number]["table"];

/** Days of partitions kept made ahead of today. */
export const daysAhead = 7;
/** Readiness warns when fewer days than this are made ahead (the keeper has not run for days). */
export const minDaysAhead = 2;
/** A day is dropped this long after all of it passed retention: a request that began before it did has ended. */
export const dropMarginSeconds = 3600;

const day = 86_400_000;

export interface Partition {
  table: PartitionedTable;
  name: string;
  /** Its range, [from, to); from undefined: from the beginning (the legacy partition). */
  from: Date | undefined;
  to: Date;
  /** A detach begun and not finished (its process died): finished by the next run. */
  detachPending: boolean;
}

/** The partitions of each partitioned table, oldest first. */
export async function listPartitions(em: Session): Promise<Partition[]> {
  const rows = await em.execute<{ parent: string; name: string; bound: string; detach_pending: boolean }[]>(
    `select p.relname as parent, c.relname as name, pg_get_expr(c.relpartbound, c.oid) as bound, i.inhdetachpending as detach_pending
       from pg_inherits i join pg_class c on c.oid = i.inhrelid join pg_class p on p.oid = i.inhparent
      where p.relname in (${partitionedTables.map((t) => `'${t.table}'`).join(", ")}) and p.relnamespace = c.relnamespace
        and p.relnamespace = to_regnamespace(current_schema())`,
  );
  const out: Partition[] = [];
  for (const r of rows) {
    const range = parseBound(r.bound);
    if (range) out.push({ table: r.parent as PartitionedTable, name: r.name, ...range, detachPending: r.detach_pending });
  }
  return out.sort((a, b) => (a.from?.getTime() ?? -Infinity) - (b.from?.getTime() ?? -Infinity));
}

/** The name of a day's partition: `<table>_p20261130`. */
export function partitionName(table: string, from: Date): string {
  return `${table}_p${from.toISOString().slice(0, 10).replaceAll("-", "")}`;
}

/** The first UTC midnight after `t`. */
function nextMidnight(t: Date): Date {
  return new Date(Math.floor(t.getTime() / day) * day + day);
}

/**
 * The days each table still lacks up to `daysAhead` after `now`: [from, to) from the last
 * partition's end, a UTC day each (the first one up to the midnight after the cutover).
 */
export function missingDays(partitions: readonly Partition[], now: Date, ahead = daysAhead): { table: PartitionedTable; name: string; from: Date; to: Date }[] {
  const until = Math.floor(now.getTime() / day) * day + (ahead + 1) * day;
  const out: { table: PartitionedTable; name: string; from: Date; to: Date }[] = [];
  for (const { table } of partitionedTables) {
    const own = partitions.filter((p) => p.table === table);
    if (own.length === 0) continue;
    let from = new Date(Math.max(...own.map((p) => p.to.getTime())));
    while (from.getTime() < until) {
      const to = nextMidnight(from);
      out.push({ table, name: partitionName(table, from), from, to });
      from = to;
    }
  }
  return out;
}

/**
 * Makes the partitions of the days up to `daysAhead` after `now` that are missing; returns their
 * names. Safe from every process at once: one at a time (an advisory lock, which a retention
 * run's detach holds too), each checking what exists once it holds it. A partition is made empty and then attached, which takes no lock that
 * stops reads or writes of the table (CREATE ... PARTITION OF would take an exclusive one).
 */
export async function ensurePartitions(em: EntityManager, now = new Date()): Promise<string[]> {
  if (missingDays(await listPartitions(em), now).length === 0) return [];
  return em.transactional(async (tx) => {
    await tx.execute(`select pg_advisory_xact_lock(hashtext('payments.partitions'))`);
    // A lock another statement holds (a long report on the table) is not waited for long: the next pass tries again.
    await tx.execute(`set local lock_timeout = '10s'`);
    const made: string[] = [];
    for (const d of missingDays(await listPartitions(tx), now)) {
      await tx.execute(`create table "${d.name}" (like "${d.table}" including defaults)`);
      await tx.execute(`alter table "${d.table}" attach partition "${d.name}" for values from ('${d.from.toISOString()}') to ('${d.to.toISOString()}')`);
      made.push(d.name);
    }
    return made;
  });
}

/** How many days ahead of `now` every table has partitions for (readiness warns under minDaysAhead). */
export function daysCovered(partitions: readonly Partition[], now: Date): number {
  let least = Infinity;
  for (const { table } of partitionedTables) {
    const own = partitions.filter((p) => p.table === table && !p.detachPending);
    const end = own.length ? Math.max(...own.map((p) => p.to.getTime())) : now.getTime();
    least = Math.min(least, (end - now.getTime()) / day);
  }
  return least === Infinity ? 0 : least;
}

/**
 * Whether a row of the partition is still needed: one of an event that a delivery not ended keeps
 * (the event, every delivery of it, their attempts), since an event and its deliveries are kept,
 * and answer, together (events/retention.ts). Read from the deliveries not ended, a few, outwards.
 */
function neededSql(p: Partition): string {
  const kept = `select k.event_id from webhook_deliveries k where k.status in ${unfinished}`;
  if (p.table === "webhook_deliveries") return `select exists (select 1 from "${p.name}" d where d.event_id in (${kept}))`;
  if (p.table === "webhook_events") return `select exists (select 1 from "${p.name}" e where e.id in (${kept}))`;
  return `select exists (select 1 from webhook_deliveries d join "${p.name}" a on a.delivery_id = d.id where d.event_id in (${kept}))`;
}

async function needed(em: Session, p: Partition): Promise<boolean> {
  const [row] = await em.execute<{ exists: boolean }[]>(neededSql(p));
  return row?.exists === true;
}

async function stillAttached(em: Session, p: Partition): Promise<boolean> {
  const [row] = await em.execute<{ attached: boolean }[]>(
    `select exists (select 1 from pg_inherits where inhrelid = to_regclass(?) and inhparent = to_regclass(?) and not inhdetachpending) as attached`,
    [p.name, p.table],
  );
  return row?.attached === true;
}

async function detachIsPending(em: Session, p: Partition): Promise<boolean> {
  const [row] = await em.execute<{ pending: boolean }[]>(
    `select exists (select 1 from pg_inherits where inhrelid = to_regclass(?) and inhparent = to_regclass(?) and inhdetachpending) as pending`,
    [p.name, p.table],
  );
  return row?.pending === true;
}

/**
 * DETACH … CONCURRENTLY under the lock the days ahead are made under (ensurePartitions). A keeper
 * attaching a day locks the tables the webhook tables' foreign keys reference, then waits to attach
 * to a table a detach holds; the detach, finishing, waits to lock those same tables to give the
 * day its own foreign keys: a deadlock (two runs at once, one dropping days, the other making the
 * days ahead, lost it about one time in fifty). Under the lock, one waits for the other instead.
 */
async function detachConcurrently(db: Session, p: Partition): Promise<void> {
  await db.execute(`select pg_advisory_lock(hashtext('payments.partitions'))`);
  try {
    await db.execute(`alter table "${p.table}" detach partition "${p.name}" concurrently`);
  } finally {
    await db.execute(`select pg_advisory_unlock(hashtext('payments.partitions'))`);
  }
}

/** The partitions the next run drops: all of their range past EVENT_RETENTION and the margin. */
export function expiredPartitions(partitions: readonly Partition[], settings: Pick<RetentionSettings, "eventSeconds">, now: Date): Partition[] {
  const before = now.getTime() - (settings.eventSeconds + dropMarginSeconds) * 1000;
  return partitions.filter((p) => p.to.getTime() <= before);
}

/**
 * Drops the partitions whose whole day is past EVENT_RETENTION (and dropMarginSeconds), unless a
 * row of one is still needed: it waits for a later run. Each is detached CONCURRENTLY (no lock
 * that stops reads or writes of the table; not inside a transaction), checked again (a delivery
 * that committed meanwhile puts it back: a replay no longer can, past retention, but an operator's
 * recovery still under way can), and dropped. Returns the rows each table lost.
 *
 * One run at a time drops days: its statements go on one connection that holds a session
 * advisory lock. Two runs at once (a lease taken over from a holder that was only slow) would
 * finish each other's detaches, and the one that lost would fail, or leave a day detached and
 * never dropped. A run that finds another dropping leaves the days to it; a holder that dies lets
 * go with its connection, and a detach it left half done is finished by the next run.
 */
export async function dropExpiredPartitions(
  em: EntityManager,
  settings: Pick<RetentionSettings, "eventSeconds">,
  now = new Date(),
  stopped: () => boolean = () => false,
): Promise<{ dropped: string[]; removed: Record<PartitionedTable, number> }> {
  const removed: Record<PartitionedTable, number> = { webhook_events: 0, webhook_deliveries: 0, webhook_attempts: 0 };
  const dropped: string[] = [];
  return withSession(em, async (db) => {
    const [lock] = await db.execute<{ taken: boolean }[]>(`select pg_try_advisory_lock(hashtext('payments.partitions.drop')) as taken`);
    if (lock?.taken !== true) return { dropped, removed };
    const all = await listPartitions(db);
    // A detach a dead run left half done is finished first (a pending detach blocks others).
    for (const p of all.filter((p) => p.detachPending)) await db.execute(`alter table "${p.table}" detach partition "${p.name}" finalize`);
    // Tables whose detach was cut short and could not be finished: their other days wait for the next run.
    const blocked = new Set<PartitionedTable>();
    for (const p of expiredPartitions(all, settings, now)) {
      if (stopped()) break;
      if (p.detachPending || blocked.has(p.table)) continue;
      try {
        if (await needed(db, p)) continue;
        await detachConcurrently(db, p);
      } catch (err) {
        if (await stillAttached(db, p)) throw err;
        if (!(await detachIsPending(db, p))) continue; // dropped by hand meanwhile: nothing to count
        // Cut short between its two transactions (cancelled, or the loser of a deadlock while it
        // waits for the table's other lockers): finished now, since while it is pending no other
        // day of the table can be detached ("already pending detach"); else by the next run.
        try {
          await db.execute(`alter table "${p.table}" detach partition "${p.name}" finalize`);
        } catch {
          blocked.add(p.table);
          continue;
        }
      }
      const [{ n } = { n: 0 }] = await db.execute<{ n: number }[]>(`select count(*)::int as n from "${p.name}"`);
      if (await needed(db, p)) {
        await db.execute(`alter table "${p.table}" attach partition "${p.name}" for values from (${p.from ? `'${p.from.toISOString()}'` : "minvalue"}) to ('${p.to.toISOString()}')`);
        continue;
      }
      await db.execute(`drop table "${p.name}"`);
      removed[p.table] += n;
      dropped.push(p.name);
    }
    await db.execute(`select pg_advisory_unlock(hashtext('payments.partitions.drop'))`);
    return { dropped, removed };
  });
}

/**
 * What the next run drops (for `ops retention`): the partitions past retention none of whose rows
 * is still needed, and their rows, counted up to `cap` each.
 */
export async function partitionsDropped(em: EntityManager, settings: Pick<RetentionSettings, "eventSeconds">, now = new Date(), cap = 1_000_000): Promise<{ names: string[]; rows: Record<PartitionedTable, number> }> {
  const rows: Record<PartitionedTable, number> = { webhook_events: 0, webhook_deliveries: 0, webhook_attempts: 0 };
  const names: string[] = [];
  for (const p of expiredPartitions(await listPartitions(em), settings, now)) {
    if (p.detachPending || (await needed(em, p))) continue;
    names.push(p.name);
    // The legacy partition's rows past retention are what the batches delete first, counted as theirs.
    if (p.from === undefined) continue;
    const [{ n } = { n: 0 }] = await em.execute<{ n: number }[]>(`select count(*)::int as n from (select 1 from "${p.name}" limit ${cap}) s`);
    rows[p.table] += n;
  }
  return { names, rows };
}
