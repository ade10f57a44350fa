import { idTime } from "./ids.ts";

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
