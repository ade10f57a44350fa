import type { EntityManager } from "./db.ts";
import { idTime } from "./ids.ts";
import { executePrepared } from "./prepared.ts";

/**
 * Reading the tables partitioned by day (webhook events, deliveries and attempts; their migration,
 * Migration20261128230000_TimePartitions, and services/retention/partitions.ts) by id: a row's id
 * carries its creation time (ids.ts newTimedIds; payments_id_time in the database), and these
 * conditions on the partition key let PostgreSQL read only the partition of that day, where a
 * condition on the id alone reads every partition's index.
 */

/** The hour before an id's time that its row's created_at may have been set back (see createdAtOfId). */
const slackMs = 3_600_000;

/**
 * SQL condition: `createdAt` (a created_at column) is where the row with the id `idExpr` (SQL: a
 * column, or a parameter `?`, which then takes the id twice) can be. The hour before the id's time is for rows whose created_at was
 * set back after they were written (tests age rows so); an id of the older shape carries no time,
 * and its row is looked for in every partition.
 */
export function createdAtOfId(createdAt: string, idExpr: string): string {
  return `${createdAt} between payments_id_time_from(${idExpr}) and payments_id_time_to(${idExpr})`;
}

/** SQL: an attempt's partition key (webhook_attempts.delivery_time) for the delivery id `idExpr`. */
export function deliveryTimeOf(idExpr: string): string {
  return `coalesce(payments_id_time(${idExpr}), '-infinity')`;
}

/**
 * The created_at range of the rows with these ids, as two parameters for `created_at between ?
 * and ?`: a statement over a batch (planned for its parameters) then reads the partitions of the
 * batch's days only, where a join on the id alone is planned against every day's. Ids of the older
 * shape carry no time: their batch spans every partition.
 */
export function createdAtRange(ids: readonly string[]): [string, string] {
  let lo = Infinity;
  let hi = -Infinity;
  for (const id of ids) {
    const t = idTime(id)?.getTime();
    if (t === undefined) return ["-infinity", "infinity"];
    lo = Math.min(lo, t - slackMs);
    hi = Math.max(hi, t);
  }
  return ids.length === 0 ? ["-infinity", "-infinity"] : [new Date(lo).toISOString(), new Date(hi).toISOString()];
}

/** "FOR VALUES FROM (MINVALUE) TO ('2026-11-30 00:00:00+00')" and the like. */
export function parseBound(bound: string): { from: Date | undefined; to: Date } | undefined {
  const m = /FROM \((MINVALUE|'([^']+)')\) TO \('([^']+)'\)/.exec(bound);
  if (!m) return undefined;
  return { from: m[2] === undefined ? undefined : new Date(m[2]), to: new Date(m[3] as string) };
}

/** A partition's name and range, [from, to) in ms since the epoch (from -Infinity: the legacy partition). */
interface Held {
  name: string;
  from: number;
  to: number;
}

type Layout = { at: number; partitions: Promise<Held[]> };

/** This process's copy of each partitioned table's layout, and when it was read, for each database (its ORM connection). */
const layouts = new WeakMap<object, Map<string, Layout>>();

const layoutsOf = (em: EntityManager): Map<string, Layout> => {
  const connection = em.getConnection();
  let of = layouts.get(connection);
  if (!of) layouts.set(connection, (of = new Map()));
  return of;
};

/** How often at most a range no partition holds reads the layout again (a day made since: retention makes them a week ahead). */
const layoutRereadMs = 10_000;

async function readLayout(em: EntityManager, table: string): Promise<Held[]> {
  const rows = await executePrepared<{ name: string; bound: string }>(
    em,
    `select c.relname as name, pg_get_expr(c.relpartbound, c.oid) as bound
       from pg_inherits i join pg_class c on c.oid = i.inhrelid join pg_class p on p.oid = i.inhparent
      where p.relname = ? and p.relnamespace = to_regnamespace(current_schema()) and not i.inhdetachpending`,
    [table],
  );
  return rows.flatMap((r) => {
    const range = parseBound(r.bound);
    return range ? [{ name: r.name, from: range.from?.getTime() ?? -Infinity, to: range.to.getTime() }] : [];
  });
}

/**
 * The partition of `table` (webhook_events, webhook_deliveries) that holds the whole of
 * `range` (createdAtRange's, ISO times), by name, or undefined when none does (the range spans
 * two days, or is unbounded: ids of the older shape). Read from this process's copy of the
 * layout (one for each database it uses), read again when no partition holds the range and the
 * copy is older than layoutRereadMs. A partition dropped since the copy was read is still named:
 * a statement that finds it gone (SQLSTATE 42P01) calls forgetLayout and reads the table instead.
 */
export async function partitionHolding(em: EntityManager, table: string, range: readonly [string, string]): Promise<string | undefined> {
  const lo = Date.parse(range[0]);
  const hi = Date.parse(range[1]);
  if (!Number.isFinite(lo) || !Number.isFinite(hi)) return undefined;
  const find = (partitions: readonly Held[]) => partitions.find((p) => p.from <= lo && hi < p.to)?.name;
  const of = layoutsOf(em);
  let layout = of.get(table);
  if (layout) {
    const found = find(await layout.partitions);
    if (found !== undefined || Date.now() - layout.at < layoutRereadMs) return found;
  }
  const read: Layout = { at: Date.now(), partitions: readLayout(em, table) };
  of.set(table, read);
  // A failed read is not kept: the next call reads again.
  read.partitions.catch(() => of.get(table) === read && of.delete(table));
  return find(await read.partitions);
}

/** Forgets this process's copy of `table`'s layout in the database of `em` (a partition it named is gone). */
export function forgetLayout(em: EntityManager, table: string): void {
  layoutsOf(em).delete(table);
}
