import type { EntityManager } from "./db.ts";
import { executePrepared, numberPlaceholders } from "./prepared.ts";
import type { CursorCodec, Keyset } from "./cursor.ts";

/** Whose rows a query may touch: a merchant in one environment. */
export interface RowOwner {
  merchantId: string;
  environment: string;
}

/** A row read with its owner's columns. */
export interface OwnedRow {
  merchant_id: string;
  environment: string;
}

/**
 * One row by primary key only, with the owner checked on the row: given the owner's
 * columns too, the planner can take a (merchant_id, environment, ...) index when its
 * statistics lag (e.g. after a bulk load) and scan the merchant's every row —
 * measured at 15 ms a lookup. `select` ends with the key's condition, e.g. "… where d.id = ?";
 * every `?` in it is the id (a time-partitioned table's condition on its partition key names it
 * again: platform/time-partitions.ts).
 */
export async function findOwned<R extends OwnedRow>(em: EntityManager, select: string, id: string, owner: RowOwner, forUpdate = false): Promise<R | undefined> {
  const uses = numberPlaceholders(select).match(/\$\d+/g)?.length ?? 0;
  // A statement that names its id more than once reads a table partitioned by day: it is planned
  // for its id (the day pruned as it is planned), since PostgreSQL 15 runs a cached generic plan
  // only after locking every day's partition and index.
  const rows = await executePrepared<R>(em, `${select}${forUpdate ? " for update" : ""}`, Array<string>(uses).fill(id), { replan: uses > 1 });
  const row = rows[0];
  return row && row.merchant_id === owner.merchantId && row.environment === owner.environment ? row : undefined;
}

export interface OwnedPage<R> {
  rows: R[];
  hasMore: boolean;
  nextCursor: string | undefined;
}

/**
 * A page of an owner's rows, newest first on (created_at, id), with a keyset cursor bound
 * to `binding` (the list and its filters): `select` reads from a table aliased `alias`,
 * `filters` are extra conditions with one `?` each, `conditions` ones with none.
 *
 * `windowsDays`, for a table partitioned by day: the page is looked for among the rows of the last
 * so many days before its start first (a bound PostgreSQL prunes the partitions by as it plans the
 * statement: planning a statement over every day's partitions costs more than running it), then in
 * a wider window, then in all. A window that yields a whole page yields the newest rows of all.
 */
export async function pageOwned<R extends { id: string; created_at: Date | string }>(
  em: EntityManager,
  cursors: CursorCodec,
  q: {
    select: string;
    alias: string;
    owner: RowOwner;
    filters: [string, unknown][];
    conditions?: string[];
    binding: string;
    cursor: string | undefined;
    limit: number;
    windowsDays?: readonly number[];
  },
): Promise<OwnedPage<R>> {
  const a = q.alias;
  const after = cursors.start(q.binding, q.cursor);
  const where = [`${a}.merchant_id = ?`, `${a}.environment = ?`, ...q.filters.map(([clause]) => clause), ...(q.conditions ?? [])];
  const params: unknown[] = [q.owner.merchantId, q.owner.environment, ...q.filters.map(([, value]) => value)];
  if (after) {
    where.push(`(${a}.created_at, ${a}.id) < (?, ?)`);
    params.push(after.createdAt, after.id);
  }
  // The newest a row can be: the cursor's, else now (and a day for clocks that differ); the days
  // after it are not read either.
  const top = after?.createdAt.getTime() ?? Date.now() + 86_400_000;
  if (q.windowsDays) {
    where.push(`${a}.created_at <= ?`);
    params.push(new Date(top));
  }
  for (const days of [...(q.windowsDays ?? []), undefined]) {
    const since = days === undefined ? [] : [`${a}.created_at >= ?`];
    const rows = await em.execute<R[]>(
      `${q.select} where ${[...where, ...since].join(" and ")} order by ${a}.created_at desc, ${a}.id desc limit ?`,
      [...params, ...(days === undefined ? [] : [new Date(top - (days + (after ? 0 : 1)) * 86_400_000)]), q.limit + 1],
    );
    if (days === undefined || rows.length > q.limit) return cursors.page(q.binding, rows, q.limit, keysetOf);
  }
  throw new Error("unreachable: the last window is unbounded");
}

function keysetOf(row: { id: string; created_at: Date | string }): Keyset {
  return { createdAt: new Date(row.created_at), id: row.id };
}
