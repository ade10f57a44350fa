import type { EntityManager } from "../../services/platform/db.ts";
import { listPartitions, partitionName, partitionedTables } from "../../services/retention/partitions.ts";

const day = 86_400_000;

/**
 * Sets the webhook tables' partitions back to begin at `firstDay` (a UTC midnight), as if the
 * service had been partitioned by day since then: the legacy partition is made anew, empty, ending
 * at firstDay, and each day from `emptyFrom` (firstDay unless given) up to the service's first day
 * gets an empty partition. The days before emptyFrom are the caller's to attach.
 */
export async function partitionsFrom(em: EntityManager, exec: (sql: string) => Promise<unknown>, firstDay: number, emptyFrom = firstDay): Promise<void> {
  const partitions = await listPartitions(em);
  for (const { table } of partitionedTables) {
    const own = partitions.filter((p) => p.table === table);
    const legacy = own.find((p) => p.from === undefined)!;
    await exec(`alter table ${table} detach partition ${legacy.name}`);
    await exec(`drop table ${legacy.name}`);
    await exec(`create table ${legacy.name} (like ${table} including defaults)`);
    await exec(`alter table ${table} attach partition ${legacy.name} for values from (minvalue) to ('${new Date(firstDay).toISOString()}')`);
    const made = Math.min(...own.filter((p) => p.from !== undefined).map((p) => p.from!.getTime()));
    for (let d = emptyFrom; d < made; d += day) {
      const name = partitionName(table, new Date(d));
      await exec(`create table ${name} (like ${table} including defaults)`);
      await exec(`alter table ${table} attach partition ${name} for values from ('${new Date(d).toISOString()}') to ('${new Date(d + day).toISOString()}')`);
    }
  }
}
