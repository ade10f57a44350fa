import { Counter, type Registry } from "prom-client";
import type { EntityManager } from "../platform/db.ts";
import { isDatabaseUnavailable } from "../platform/errors.ts";
import { executePrepared } from "../platform/prepared.ts";

/** One create's part of a statement: its CTEs (each name ending with the suffix it was built for), then its answer's columns and `from`. */
export interface CreatePart {
  ctes: string;
  answer: string;
  params: unknown[];
}

/** A one-statement create waiting for its statement. */
export interface CreateWrite {
  em: EntityManager;
  /**
   * Creates of the same shape build the same text (their addresses' guards, one method or
   * several): only they share a statement, so that a few texts are prepared and planned once.
   */
  shape: string;
  /** Its Idempotency-Key (merchant, environment, key): two writes of one key never share a statement. */
  key: string;
  /** The part, its CTE names ending with `suffix`; `lockTimeoutMs` how long it waits for a lock another request holds (unset: the usual wait). */
  build(suffix: string, lockTimeoutMs: number | undefined): CreatePart;
}

/** The answer row of a create's part. */
export type CreateAnswer = Record<string, unknown>;

/** The most creates one statement writes: 1, 2, 4, 8 or 16 of a shape, so that each shape has five texts at most. */
const maxPerStatement = 16;
/**
 * In a statement with others, a create waits this long for any lock (a key another request holds;
 * an endpoint row an operation on the endpoint holds, which the deliveries' foreign key waits for),
 * then the statement is written again one create at a time, each with the usual wait: a client
 * retrying a create still in flight holds up its own create, not the ones that came with it.
 */
const sharedLockTimeoutMs = 100;

interface Waiting {
  write: CreateWrite;
  resolve(answer: CreateAnswer): void;
  reject(err: unknown): void;
}

/**
 * Writes the one-statement creates that arrive together (in the same turn of the event loop, as
 * the delivery worker's Batcher gathers its writes) in one statement and one commit: each
 * create's CTEs with their own names, side by side, and each answer a row of the result. A lone
 * create waits for nothing. A statement that fails for one create's sake (a constraint, a lock
 * another request holds) is written again one create at a time, so that only that create
 * fails, and each of them is answered as soon as its own statement is; one that fails because
 * the database is away fails every create in it, as it would have alone.
 */
export class CreateWriter {
  #waiting: Waiting[] = [];
  readonly #statements: Counter<"creates"> | undefined;
  readonly #rewritten: Counter<"cause"> | undefined;

  /** `registry`: counts the statements by how many creates each wrote, and the creates written again alone, by cause. */
  constructor(o: { registry?: Registry } = {}) {
    if (!o.registry) return;
    this.#statements = new Counter({
      name: "payments_intent_create_statements_total",
      help: "Statements that wrote one-statement creates, by how many creates each wrote (1, 2, 4, 8, 16).",
      labelNames: ["creates"],
      registers: [o.registry],
    });
    this.#rewritten = new Counter({
      name: "payments_intent_create_rewritten_total",
      help: "Creates of a shared statement that failed, written again one at a time, by cause: lock (a lock waited for past 100 ms), refused (anything else the database refused).",
      labelNames: ["cause"],
      registers: [o.registry],
    });
    for (const creates of ["1", "2", "4", "8", "16"]) this.#statements.inc({ creates }, 0);
    for (const cause of ["lock", "refused"]) this.#rewritten.inc({ cause }, 0);
  }

  write(write: CreateWrite): Promise<CreateAnswer> {
    return new Promise((resolve, reject) => {
      if (this.#waiting.push({ write, resolve, reject }) === 1) setImmediate(() => this.#flush());
    });
  }

  #flush(): void {
    const batch = this.#waiting;
    this.#waiting = [];
    for (const indexes of statementsOf(batch.map((w) => w.write))) void this.#statement(indexes.map((i) => batch[i] as Waiting));
  }

  async #statement(chunk: readonly Waiting[]): Promise<void> {
    try {
      const rows = await writeTogether(chunk.map((w) => w.write));
      this.#statements?.inc({ creates: String(chunk.length) });
      chunk.forEach((w, k) => w.resolve(rows[k] as CreateAnswer));
    } catch (err) {
      if (chunk.length === 1 || isDatabaseUnavailable(err)) return chunk.forEach((w) => w.reject(err));
      this.#rewritten?.inc({ cause: (err as { code?: unknown }).code === "55P03" ? "lock" : "refused" }, chunk.length);
      for (const w of chunk) void this.#statement([w]);
    }
  }
}

/**
 * The statements a batch is written in, as indexes into it: by shape, 16, 8, 4, 2 or 1 at a time;
 * a key seen twice goes into a statement of its own.
 */
export function statementsOf(items: readonly Pick<CreateWrite, "shape" | "key">[]): number[][] {
  const byShape = new Map<string, number[]>();
  const alone: number[][] = [];
  const keys = new Set<string>();
  items.forEach((item, i) => {
    if (keys.has(item.key)) return alone.push([i]);
    keys.add(item.key);
    const group = byShape.get(item.shape) ?? [];
    group.push(i);
    byShape.set(item.shape, group);
  });
  const statements: number[][] = [];
  for (const group of byShape.values()) {
    for (let at = 0; at < group.length; ) {
      let n = maxPerStatement;
      while (n > group.length - at) n /= 2;
      statements.push(group.slice(at, at + n));
      at += n;
    }
  }
  return [...statements, ...alone];
}

/** One statement for the creates: alone, as its own part always was; together, each part's names suffixed with its place. */
async function writeTogether(chunk: readonly CreateWrite[]): Promise<CreateAnswer[]> {
  const together = chunk.length > 1;
  const parts = chunk.map((c, k) => c.build(together ? `_${k}` : "", together ? sharedLockTimeoutMs : undefined));
  const sql = `with ${parts.map((p) => p.ctes).join(",\n")}\n${parts.map((p, k) => `select ${k} as k, ${p.answer}`).join("\nunion all\n")}`;
  const rows = await executePrepared<CreateAnswer & { k: number }>((chunk[0] as CreateWrite).em, sql, parts.flatMap((p) => p.params));
  const byPlace = new Map(rows.map((r) => [Number(r.k), r]));
  return chunk.map((_, k) => {
    const row = byPlace.get(k);
    if (!row) throw new Error(`a create's statement answered no row for its part ${k}`);
    return row;
  });
}
