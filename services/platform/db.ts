import { MikroORM, type EntityManager, type Options, type PostgreSqlConnection } from "@mikro-orm/postgresql";
import { Migrator } from "@mikro-orm/migrations";
import { migrations } from "./migrations/index.ts";
import { PooledClient } from "./pg-client.ts";
import { registerPool } from "./prepared.ts";

export type { EntityManager };
export type Database = MikroORM;

/** The Unix socket directory a connection URL names in its `host` parameter (as libpq and pg read it), if any. */
export function unixSocketOf(url: string): string | undefined {
  const host = URL.canParse(url) ? new URL(url).searchParams.get("host") : null;
  return host?.startsWith("/") ? host : undefined;
}

/** How long a connection of the pool stays open unused (pg's own default: 10 s). */
const poolIdleMs = 300_000;

/**
 * Opens the ORM. Migrations are a committed, explicit list (no folder
 * discovery), applied by `migrate()` at start and by `npm run migrate`.
 */
export async function openDatabase(url: string, entities: NonNullable<Options["entities"]>, poolSize = 10): Promise<Database> {
  const orm = await MikroORM.init({
    clientUrl: url,
    // libpq's and pg's `?host=/run/postgresql`: a Unix socket, which the ORM's URL parsing (host from the authority) would miss.
    host: unixSocketOf(url),
    entities,
    extensions: [Migrator],
    // A connection idle for pg's default 10 s was closed, and the next burst opened it again:
    // PostgreSQL starts a backend, and each of the create's prepared statements is parsed and
    // planned anew on it (a plan for each of its first five calls: 12 ms each for a statement of
    // 16 creates, against 3 ms to run it). The merchant-path bench's step from 20 to 300 creates
    // a second reopened 12 connections at once, and a steady load closed and reopened some
    // every few seconds. Kept for minutes, a burst finds them ready.
    pool: { min: 0, max: poolSize, idleTimeoutMillis: poolIdleMs },
    // pg's Pool waits for ever for a connection by default: a database host that drops packets
    // would hold a request for minutes. Past this, the request answers 503 unavailable.
    // A connection an outage spent (cut, read-only, refused) is discarded, not handed out again.
    driverOptions: { connectionTimeoutMillis: 10_000, Client: PooledClient },
    migrations: {
      path: "services/platform/migrations",
      tableName: "mikro_orm_migrations",
      transactional: true,
      allOrNothing: true,
      snapshot: false,
      emit: "ts",
      silent: true,
      migrationsList: migrations,
    },
    // Tables kept by plain SQL, with no entity (their modules say why): a generated migration must not drop them.
    // The webhook tables partitioned by day, and their partitions, are laid out by their migration
    // (Migration20261128230000_TimePartitions) and the retention job: the generator knows no partitions.
    // Functions are written by migrations too (payments_id_time, which the partitions' lookups read): none is dropped.
    schemaGenerator: {
      skipTables: ["rate_limit_buckets", "webhook_endpoint_circuits", "webhook_endpoint_slots", /^webhook_(events|deliveries|attempts)(_legacy|_p\d{8})?$/],
      ignoreRoutines: true,
    },
    debug: false,
    // Every unit of work runs on its own fork; a stray global use is a bug.
    allowGlobalContext: false,
  });
  // init() connects lazily; a bad URL should fail at start, not at the first request.
  await orm.connect();
  registerPool(orm.em.getConnection(), await (orm.em.getConnection() as PostgreSqlConnection).getNativeClient());
  return orm;
}

/** Applies pending migrations; returns the names applied. */
export async function migrate(db: Database): Promise<string[]> {
  const applied = await db.migrator.up();
  return applied.map((m) => m.name);
}
