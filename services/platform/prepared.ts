import { createHash } from "node:crypto";
import { CompiledQuery, type Kysely } from "kysely";
import pg from "pg";
import type { EntityManager } from "./db.ts";

/** The pg pool under each ORM connection (every fork of an EntityManager shares its connection). */
const pools = new WeakMap<object, pg.Pool>();

/** Each pool's keyed-lookups pool (executeByKey), opened at its first use and ended with it. */
const keyedPools = new WeakMap<pg.Pool, pg.Pool>();

/** Connections of a process's keyed-lookups pool: one statement each, a worker's claims and finishes. */
const keyedPoolSize = 2;

/**
 * Sessions of the keyed-lookups pool: the plan PostgreSQL keeps for each named statement is made
 * once, at its first call (not after five custom plans, nor replaced by one), and it reads no
 * table by a sequential scan where an index serves: a plan made while the table held ten rows
 * still reads ten rows by key when it holds a million.
 */
const keyedSessionOptions = "-c plan_cache_mode=force_generic_plan -c enable_seqscan=off";

export function registerPool(connection: object, pool: pg.Pool): void {
  pools.set(connection, pool);
  // The keyed pool is this pool's helper: it ends when the database is closed (the ORM ends its pool).
  const end = pool.end.bind(pool);
  pool.end = (async () => {
    const keyed = keyedPools.get(pool);
    keyedPools.delete(pool);
    await Promise.all([keyed?.end(), end()]);
  }) as typeof pool.end;
}

interface Compiled {
  name: string;
  text: string;
}

const compiled = new Map<string, Compiled>();
const maxStatements = 200;

function compiledOf(sql: string): Compiled {
  let statement = compiled.get(sql);
  if (!statement) {
    // A statement is prepared once per connection under its name; a few hundred texts at most.
    statement = { name: `p_${createHash("sha256").update(sql).digest("hex").slice(0, 16)}`, text: numberPlaceholders(sql) };
    if (compiled.size >= maxStatements) compiled.clear();
    compiled.set(sql, statement);
  }
  return statement;
}

/** `?` placeholders as $1, $2, …, outside quoted strings and identifiers. */
export function numberPlaceholders(sql: string): string {
  let out = "";
  let n = 0;
  let quote: string | undefined;
  for (const ch of sql) {
    if (quote !== undefined) {
      if (ch === quote) quote = undefined;
      out += ch;
    } else if (ch === "'" || ch === '"') {
      quote = ch;
      out += ch;
    } else {
      out += ch === "?" ? `$${++n}` : ch;
    }
  }
  return out;
}

/**
 * Runs one of the hot path's statements as a prepared statement on the pool, with its values
 * sent apart: the ORM's `execute` writes every value into the SQL text, so PostgreSQL parses and
 * plans each call anew (a create's one statement is seven CTEs) and we escape every value. Same
 * pool and type parsers as the ORM's. Inside a transaction it goes through the ORM, which holds
 * that transaction's connection.
 *
 * `replan`: sent as an unnamed statement, so PostgreSQL plans it for each call with the table's
 * size of the moment, instead of the generic plan it keeps for a named statement from its sixth
 * call on. That plan is costed with the statistics of its time: the delivery worker's claim and
 * finish, planned while webhook_deliveries was small (a new installation, or the statistics of the
 * last ANALYZE before a burst), joined their batch to a sequential scan of the table and kept
 * doing so as a backlog grew it (the bench's drain: 675 sequential scans reading 11.4 million
 * rows for 20 000 deliveries). The text stays short and its values apart; planning a batch costs
 * far less than one such scan.
 *
 * Inside a transaction it goes on that transaction's connection (the ORM's, through the query
 * builder under it), unnamed, with its values sent apart all the same: a batch's values are one
 * JSON text of megabytes (a settlement's events, a block's outputs), and the ORM's escaping of it
 * into the SQL took over a second for 4 000 events, where PostgreSQL inserts them in 0.2 s
 * (docs/performance.md, the bitcoin catch-up).
 */
export async function executePrepared<T>(em: EntityManager, sql: string, params: readonly unknown[], o: { replan?: boolean } = {}): Promise<T[]> {
  const transaction = em.isInTransaction() ? (em.getTransactionContext() as Partial<Pick<Kysely<unknown>, "executeQuery">> | undefined) : undefined;
  if (transaction?.executeQuery) {
    const result = await transaction.executeQuery<T>(CompiledQuery.raw(numberPlaceholders(sql), [...params]));
    return [...result.rows];
  }
  const pool = em.isInTransaction() ? undefined : pools.get(em.getConnection());
  if (!pool) return em.execute<T[]>(sql, [...params]);
  const statement = compiledOf(sql);
  const result = await pool.query(o.replan ? { text: statement.text, values: params as unknown[] } : { name: statement.name, text: statement.text, values: params as unknown[] });
  return result.rows as T[];
}

/**
 * Runs a statement that reads each of its tables by key only as a named statement on a small pool
 * of its own whose sessions keep one generic plan per statement, planned to read no table whole
 * (keyedSessionOptions): the statement is planned once per connection instead of at each call, as
 * `replan` does for statements whose plan depends on the table's size. Planning a worker's claim
 * and finish was half of what PostgreSQL spent on them at 300 creates a second
 * (docs/performance.md). Every read of a table that grows must name the rows' keys as an array
 * (`id = any(?)`) beside any join on them: only then is the index on the key the one way in,
 * whatever sizes the plan was made with (a join alone was planned, on a table of ten rows, as a
 * read of a whole index: test/integration/delivery-keyed-plans.test.ts). A partitioned table is
 * read by its partition's name: a generic plan of the parent locks every partition at each call.
 * Each such read searches the array again for each row of the join: for batches of a few rows.
 * Inside a transaction, or without the ORM's pool, it runs as executePrepared does (planned for
 * each call).
 */
export async function executeByKey<T>(em: EntityManager, sql: string, params: readonly unknown[]): Promise<T[]> {
  const pool = em.isInTransaction() ? undefined : pools.get(em.getConnection());
  if (!pool) return executePrepared<T>(em, sql, params, { replan: true });
  let keyed = keyedPools.get(pool);
  if (!keyed) {
    // The pool's connection settings, its password too (kept out of the spread: not enumerable, so no log prints it).
    const { password, ssl } = pool.options;
    const options = [pool.options.options, keyedSessionOptions].filter(Boolean).join(" ");
    keyed = new pg.Pool({ ...pool.options, password, ssl, max: keyedPoolSize, min: 0, options });
    // An idle connection cut by the server is reported here; the next call makes a new one.
    keyed.on("error", () => undefined);
    keyedPools.set(pool, keyed);
  }
  const statement = compiledOf(sql);
  const result = await keyed.query({ name: statement.name, text: statement.text, values: params as unknown[] });
  return result.rows as T[];
}

/** Plain SQL on one connection: `?` placeholders, rows back (what the ORM's `execute` takes). */
export interface Session {
  execute<T>(sql: string, params?: readonly unknown[]): Promise<T>;
}

/**
 * Runs `work` on one connection of the pool, outside any transaction, for what must hold a
 * session's state between statements that cannot share a transaction (a session advisory lock
 * around DETACH … CONCURRENTLY). It is the pool's own connection, so a pool of one (the ops CLI)
 * still works; one whose work failed is discarded, not handed out again with a lock it may hold.
 */
export async function withSession<T>(em: EntityManager, work: (session: Session) => Promise<T>): Promise<T> {
  const pool = pools.get(em.getConnection());
  if (!pool || em.isInTransaction()) throw new Error("withSession needs the ORM's pool, outside a transaction");
  const client = await pool.connect();
  const session: Session = {
    execute: async <T>(sql: string, params: readonly unknown[] = []) => (await client.query(numberPlaceholders(sql), params as unknown[])).rows as T,
  };
  try {
    const result = await work(session);
    client.release();
    return result;
  } catch (err) {
    client.release(true);
    throw err;
  }
}
