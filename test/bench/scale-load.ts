import { readFile, statfs } from "node:fs/promises";
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { partitionName, partitionedTables as tables } from "../../services/retention/partitions.ts";

/**
 * Past days of webhook deliveries for the scale scenario, laid out as the service's partitions by day
 * (services/retention/partitions.ts) and loaded fast enough for 100 million deliveries: each day's
 * three tables are filled before they have an index (INSERT … SELECT from generate_series in the
 * server), frozen and analyzed, indexed like their parent, and attached (a check constraint of the
 * day's range saves the attach its scan). Two days at a time, one per core.
 *
 * The days are UNLOGGED tables: nothing measured writes to a past day, and reading or dropping one
 * costs the same; WAL for 100 GB of past rows and their indexes would double the load's writes.
 */

const day = 86_400_000;

export interface DayLoad {
  /** The merchant and its endpoints (disabled): delivery k of an event goes to endpoints[k]. */
  merchant: string;
  endpoints: string[];
  /** Events a day; each has endpoints.length deliveries. */
  eventsPerDay: number;
  /** An attempt per delivery, or none. */
  attempts: boolean;
}

export interface Loaded {
  days: number;
  events: number;
  deliveries: number;
  attempts: number;
  /** The days left empty because the disk came within minFreeBytes. */
  emptyDays: number;
}

/** The base62 time of ids (platform/ids.ts newTimedIds) in SQL, one expression so the planner inlines it. */
const b62 = `create or replace function pg_temp.b62(ms bigint) returns text language sql immutable as $$ select ${Array.from(
  { length: 8 },
  (_, i) => `substr('0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz', ((ms / ${62 ** (7 - i)}::bigint) % 62)::int + 1, 1)`,
).join(" || ")} $$`;

/** The statements that give a detached day the parent's primary key and indexes. */
async function indexStatements(client: pg.Client, table: string, child: string): Promise<string[]> {
  const pk = await client.query<{ def: string }>(`select pg_get_constraintdef(oid) as def from pg_constraint where conrelid = $1::regclass and contype = 'p'`, [table]);
  const indexes = await client.query<{ def: string }>(
    `select pg_get_indexdef(indexrelid) as def from pg_index where indrelid = $1::regclass and not indisprimary order by indexrelid`,
    [table],
  );
  return [
    ...pk.rows.map((r) => `alter table ${child} add ${r.def}`),
    ...indexes.rows.map((r, n) => r.def.replace(/^CREATE (UNIQUE )?INDEX \S+ ON ONLY \S+ /, `CREATE $1INDEX ${child}_i${n} ON ${child} `)),
  ];
}

/** One day: its three tables made, filled, frozen, indexed and attached. */
async function loadDay(client: pg.Client, start: number, spec: DayLoad, fill: boolean): Promise<void> {
  const from = new Date(start).toISOString();
  const to = new Date(start + day).toISOString();
  const nameOf = (table: string) => partitionName(table, new Date(start));
  for (const { table, key } of tables) {
    await client.query(`create unlogged table ${nameOf(table)} (like ${table} including defaults including constraints)`);
    await client.query(`alter table ${nameOf(table)} add constraint ${nameOf(table)}_day check (${key} >= '${from}' and ${key} < '${to}')`);
  }
  const [ev, wd, wa] = tables.map(({ table }) => nameOf(table));
  if (fill) {
    await client.query(
      `insert into ${ev} (id, merchant_id, environment, type, payload, created_at)
       select 'evt_' || pg_temp.b62(ms) || substr(md5(random()::text), 1, 18), $3, 'test', 'webhook.test', '{"bench":"scale"}',
              timestamptz 'epoch' + ms * interval '1 millisecond'
         from (select $1::bigint + (g::bigint * ${day - 1000}) / $2 as ms from generate_series(0, $2 - 1) g) t`,
      [start, spec.eventsPerDay, spec.merchant],
    );
    await client.query(
      `insert into ${wd} (id, merchant_id, environment, event_id, endpoint_id, status, attempt_count, last_attempt_at, last_status_code, published_at, created_at, updated_at)
       select 'wd_' || substr(ev.id, 5, 8) || substr(md5(random()::text), 1, 18), ev.merchant_id, 'test', ev.id, e.endpoint, 'delivered', 1,
              ev.created_at, 200, ev.created_at, ev.created_at, ev.created_at
         from ${ev} ev, unnest($1::text[]) as e(endpoint)`,
      [spec.endpoints],
    );
    if (spec.attempts) {
      await client.query(
        `insert into ${wa} (delivery_id, number, started_at, duration_ms, status_code, outcome, delivery_time)
         select id, 1, created_at, 12, 200, 'success', created_at from ${wd}`,
      );
    }
    // Frozen before the indexes are built: the vacuum then has only the heap to read.
    await client.query(`vacuum (freeze, analyze) ${ev}, ${wd}, ${wa}`);
  }
  for (const { table } of tables) {
    for (const statement of await indexStatements(client, table, nameOf(table))) await client.query(statement);
    await client.query(`alter table ${table} attach partition ${nameOf(table)} for values from ('${from}') to ('${to}')`);
  }
}

async function freeBytes(client: pg.Client): Promise<number> {
  const dir = (await client.query<{ data_directory: string }>(`show data_directory`)).rows[0]!.data_directory;
  const fs = await statfs(dir);
  return fs.bavail * fs.bsize;
}

/**
 * Loads the days [firstDay, firstDay + count days), the oldest first, on `workers` connections. Stops
 * filling (the remaining days are made empty) once the disk holding PostgreSQL's data has less than
 * minFreeBytes free: a full disk would stop PostgreSQL itself.
 */
export async function loadPastDays(
  databaseUrl: string,
  firstDay: number,
  count: number,
  spec: DayLoad,
  options: { workers: number; minFreeBytes: number; log: (line: string) => void },
): Promise<Loaded> {
  const loaded: Loaded = { days: 0, events: 0, deliveries: 0, attempts: 0, emptyDays: 0 };
  let next = 0;
  let full = false;
  const t0 = performance.now();
  const worker = async () => {
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    try {
      await client.query(b62);
      await client.query(`set maintenance_work_mem = '512MB'`);
      for (let d = next++; d < count; d = next++) {
        full ||= (await freeBytes(client)) < options.minFreeBytes;
        await loadDay(client, firstDay + d * day, spec, !full);
        if (full) {
          loaded.emptyDays += 1;
          continue;
        }
        loaded.days += 1;
        loaded.events += spec.eventsPerDay;
        loaded.deliveries += spec.eventsPerDay * spec.endpoints.length;
        loaded.attempts += spec.attempts ? spec.eventsPerDay * spec.endpoints.length : 0;
        if (loaded.days % 10 === 0) options.log(`scale: ${loaded.days} of ${count} days loaded (${Math.round((performance.now() - t0) / 1000)} s)`);
      }
    } finally {
      await client.end();
    }
  };
  await Promise.all(Array.from({ length: options.workers }, worker));
  if (loaded.emptyDays > 0) options.log(`scale: the disk came within ${options.minFreeBytes} bytes free: ${loaded.emptyDays} days left empty`);
  return loaded;
}

/**
 * Waits (up to `maxMs`) until the kernel has written the load out: otherwise the first measured
 * phase shares the disk with gigabytes of writeback. Returns the seconds waited.
 */
export async function writtenOut(maxMs: number, belowBytes = 64 * 2 ** 20): Promise<number> {
  const t0 = performance.now();
  for (;;) {
    const info = await readFile("/proc/meminfo", "utf8").catch(() => "");
    const kb = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, "m").exec(info)?.[1] ?? 0);
    if (kb("Dirty") + kb("Writeback") < belowBytes / 1024 || performance.now() - t0 > maxMs) return (performance.now() - t0) / 1000;
    await sleep(500);
  }
}
