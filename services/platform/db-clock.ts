import type { EntityManager } from "./db.ts";

/**
 * The database's clock as a transaction reads it once it holds the locks of what it changes
 * (clock_timestamp(): the moment, not the transaction's start), to the millisecond the columns keep.
 * A transaction that waited for a row reads it after whatever committed on that row before it, on
 * one clock whatever each process's says: taken before the wait, a time would place what the
 * transaction records before a change that in fact came first (a payment before a cancel).
 */
export async function lockedNow(tx: EntityManager): Promise<Date> {
  const [row] = await tx.execute<{ ms: number | string }[]>(`select floor(extract(epoch from clock_timestamp()) * 1000)::float8 as ms`);
  return new Date(Number(row?.ms));
}
