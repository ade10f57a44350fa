import type { Database } from "../../services/platform/db.ts";

/** A running system under test: the service processes, their database, a merchant with a Test key. */
export interface SystemInfo {
  /** REST gateway, e.g. http://127.0.0.1:41234 */
  base: string;
  /** The rpc port of the same process (gRPC over h2c, Connect). */
  rpcUrl: string;
  /** host:port of the main service process's inspector, for CPU profiles. */
  inspector: string;
  /** The main service process, for its CPU time (cpu.ts). */
  servicePid: number;
  databaseUrl: string;
  /** The database's name (its PostgreSQL backends are titled with it). */
  database: string;
  /** The bench's own connection to the system's database, for setup and checks. */
  db: Database;
  /** The system's SECRET_ENCRYPTION_KEY. */
  masterKey: Buffer;
  /** The system's environment, for scenarios that start processes of their own. */
  env: Record<string, string>;
  merchant: { id: string; key: string };
  /** Requests the (local) exchange rate sources have answered so far. */
  exchangeRequests(): number;
}

/** What every scenario gets: the main system, the mode, and a progress log. */
export interface BenchContext extends SystemInfo {
  quick: boolean;
  log(message: string): void;
}

export interface MetricSpec {
  label: string;
  unit: string;
  /** A target from the issue: the median of the runs is compared with it. */
  target?: { op: ">=" | "<="; value: number };
  /** The target must be met: a median that misses it fails the bench (others are only reported, machines being noisy). */
  checked?: boolean;
}

/** One measured run returns a value per metric. */
export type RunResult = Record<string, number>;

export interface Scenario {
  name: string;
  title: string;
  metrics: Record<string, MetricSpec>;
  /** Runs on a system of its own (not the main service process): no CPU profile of the main process. */
  ownSystem?: boolean;
  /** Once, before the warm-up: data loading and the like. */
  setup?(ctx: BenchContext): Promise<void>;
  /** Once, before the measured runs; not reported. */
  warmup?(ctx: BenchContext): Promise<void>;
  run(ctx: BenchContext): Promise<RunResult>;
  teardown?(ctx: BenchContext): Promise<void>;
}
