import { createHash } from "node:crypto";
import { CompiledQuery, type Kysely } from "kysely";
import type pg from "pg";
import type { EntityManager } from "./db.ts";

/** The pg pool under each ORM connection (every fork of an EntityManager shares its connection). */
const pools = new WeakMap<object, pg.Pool>();

export function registerPool(connection: object, pool: pg.Pool): void {
  pools.set(connection, pool);
}

interface Compiled {
  name: string;
  text: string;
}

const compiled = new Map<string, Compiled>();
const maxStatements = 200;

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
  let statement = compiled.get(sql);
  if (!statement) {
    // A statement is prepared once per connection under its name; a few hundred texts at most.
    statement = { name: `p_${createHash("sha256").update(sql).digest("hex").slice(0, 16)}`, text: numberPlaceholders(sql) };
    if (compiled.size >= maxStatements) compiled.clear();
    compiled.set(sql, statement);
  }
  const result = await pool.query(o.replan ? { text: statement.text, values: params as unknown[] } : { name: statement.name, text: statement.text, values: params as unknown[] });
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
