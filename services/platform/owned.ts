import type { EntityManager } from "./db.ts";
import { executePrepared } from "./prepared.ts";
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
 * measured at 15 ms a lookup. `select` ends with the key's condition, e.g. "… where d.id = ?".
 */
export async function findOwned<R extends OwnedRow>(em: EntityManager, select: string, id: string, owner: RowOwner, forUpdate = false): Promise<R | undefined> {
  const rows = await executePrepared<R>(em, `${select}${forUpdate ? " for update" : ""}`, [id]);
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
 */
export async function pageOwned<R extends { id: string; created_at: Date | string }>(
  em: EntityManager,
  cursors: CursorCodec,
  q: { select: string; alias: string; owner: RowOwner; filters: [string, unknown][]; conditions?: string[]; binding: string; cursor: string | undefined; limit: number },
): Promise<OwnedPage<R>> {
  const a = q.alias;
  const after = cursors.start(q.binding, q.cursor);
  const where = [`${a}.merchant_id = ?`, `${a}.environment = ?`, ...q.filters.map(([clause]) => clause), ...(q.conditions ?? [])];
  const params: unknown[] = [q.owner.merchantId, q.owner.environment, ...q.filters.map(([, value]) => value)];
  if (after) {
    where.push(`(${a}.created_at, ${a}.id) < (?, ?)`);
    params.push(after.createdAt, after.id);
  }
  const rows = await em.execute<R[]>(
    `${q.select} where ${where.join(" and ")} order by ${a}.created_at desc, ${a}.id desc limit ?`,
    [...params, q.limit + 1],
  );
  return cursors.page(q.binding, rows, q.limit, keysetOf);
}

function keysetOf(row: { id: string; created_at: Date | string }): Keyset {
  return { createdAt: new Date(row.created_at), id: row.id };
}
