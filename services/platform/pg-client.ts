import pg from "pg";
import { isDatabaseUnavailable } from "./errors.ts";

/**
 * Session parameters the server reports at connect (PostgreSQL 14+) that make a session unable
 * to write for the rest of its life: a standby, or a database left read-only (what a failover
 * does to the old primary). A session keeps the default it started with, so once the server
 * writes again only a new connection can.
 */
const readOnlyParameters = new Set(["default_transaction_read_only", "in_hot_standby"]);

type Release = (err?: Error | boolean) => void;

/**
 * The pool's connection class. A connection that failed as an outage (read-only, not accepting
 * connections, cut, timed out: `isDatabaseUnavailable`) or that began read-only is spent: the
 * pool discards it when it is released instead of handing it out again, so the request after the
 * database recovers runs on a fresh connection.
 */
export class PooledClient extends pg.Client {
  #spent = false;
  #release: Release | undefined;

  constructor(config?: string | pg.ClientConfig) {
    super(config);
    this.connection.on("parameterStatus", (msg: { parameterName: string; parameterValue: string }) => {
      if (readOnlyParameters.has(msg.parameterName) && msg.parameterValue === "on") this.#spent = true;
    });
    const query = this.query;
    // Every query's failure is seen, whichever of pg's call forms the caller used; a promise's
    // rejection still reaches its caller (this only listens).
    this.query = ((...args: Parameters<typeof query>) => {
      const result = (query as (...a: unknown[]) => unknown).apply(this, args);
      if (result instanceof Promise) result.catch((err: unknown) => this.#failed(err));
      return result;
    }) as typeof query;
  }

  /** Whether this connection must not be reused. */
  get spent(): boolean {
    return this.#spent;
  }

  #failed(err: unknown): void {
    if (isDatabaseUnavailable(err)) this.#spent = true;
  }

  // pg-pool assigns each checkout's release function to the client; a spent connection's
  // release passes an error, which makes the pool discard it.
  get release(): Release {
    return (err) => this.#release?.(err ?? (this.#spent ? new Error("connection spent by a database outage") : undefined));
  }

  set release(fn: Release) {
    this.#release = fn;
  }
}
