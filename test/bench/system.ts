import { randomBytes } from "node:crypto";
import { createApiKey, createMerchant } from "../../services/auth/admin.ts";
import { scopes } from "../../services/auth/keys.ts";
import { openDatabase } from "../../services/app/database.ts";
import { createTestDatabase, deleteStream, natsUrl, uniqueName } from "../helpers/harness.ts";
import { fakeExchanges } from "../helpers/exchanges.ts";
import { freePort, spawnService, type ServiceProcess } from "../helpers/processes.ts";
import type { SystemInfo } from "./types.ts";

/** Teardown functions, run in reverse order. */
export class Cleanup {
  private fns: (() => unknown)[] = [];
  teardown(fn: () => unknown): void {
    this.fns.push(fn);
  }
  async run(): Promise<void> {
    for (const fn of this.fns.reverse()) await Promise.resolve(fn()).catch(() => undefined);
    this.fns = [];
  }
}

export interface System extends SystemInfo {
  processes: ServiceProcess[];
  /** Another process of the same system, e.g. ["worker"]. */
  spawn(roles: string[]): Promise<ServiceProcess>;
}

/**
 * A fresh database and JetStream prefix, and the service as its own process
 * (`main.ts`, every role unless `mainRoles` says which), as an operator would run it. Logs at warn level.
 */
export async function startSystem(cleanup: Cleanup, extraEnv: Record<string, string> = {}, mainRoles: string[] = []): Promise<System> {
  const databaseUrl = await createTestDatabase(cleanup);
  const masterKey = randomBytes(32);
  const port = await freePort();
  const prefix = uniqueName("bench");
  // Local exchanges (never the internet), read once at start and not again (refreshed hourly, fresh
  // for a day): any request they see during a scenario was made by a create (fiat-create checks none is).
  // BTC and ETH: what the fiat-priced scenarios quote (USDC keeps its peg).
  const exchanges = await fakeExchanges({
    kraken: { "BTC-USD": "50000.0", "ETH-USD": "2500.0" },
    coinbase: { "BTC-USD": "50010.00", "ETH-USD": "2501.00" },
    bitstamp: { "BTC-USD": "49990.00", "ETH-USD": "2499.00" },
  });
  cleanup.teardown(() => exchanges.close());
  const env: Record<string, string> = {
    DATABASE_URL: databaseUrl,
    NATS_URL: natsUrl,
    JETSTREAM_PREFIX: prefix,
    SECRET_ENCRYPTION_KEY: masterKey.toString("hex"),
    LOG_LEVEL: "warn",
    DATA_DIR: `/tmp/${prefix}`,
    // The bench drives one API key far past its per-key limit (100 a second by default): it measures
    // the service, not the limit.
    API_READ_RATE_LIMIT: "1000000",
    API_WRITE_RATE_LIMIT: "1000000",
    ...exchanges.env,
    RATE_REFRESH_SECONDS: "3600",
    RATE_MAX_AGE_SECONDS: "86400",
    // BENCH_PROFILE_DIR=dir: each service process writes a CPU profile there when it stops.
    ...(process.env.BENCH_PROFILE_DIR ? { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${process.env.BENCH_PROFILE_DIR}` } : {}),
    ...extraEnv,
  };
  cleanup.teardown(() => deleteStream(prefix));
  const processes: ServiceProcess[] = [];
  const spawn = async (roles: string[], ports: Record<string, string> = { PORT: "0", RPC_PORT: "0", OPS_PORT: "0" }) => {
    const p = spawnService(cleanup, roles, { ...env, ...ports });
    cleanup.teardown(() => p.kill("SIGTERM"));
    await p.started;
    processes.push(p);
    return p;
  };
  // The main process's inspector (loopback only) lets the bench profile it during a scenario's run.
  const rpcPort = await freePort();
  const inspectPort = await freePort();
  const inspect = `--inspect=127.0.0.1:${inspectPort}`;
  const main = await spawn(mainRoles, { PORT: String(port), RPC_PORT: String(rpcPort), OPS_PORT: "0", NODE_OPTIONS: env.NODE_OPTIONS ? `${env.NODE_OPTIONS} ${inspect}` : inspect });
  const db = await openDatabase(databaseUrl, 4);
  cleanup.teardown(() => db.close());
  const em = db.em.fork();
  const merchant = await createMerchant(em, "Bench Shop");
  const key = await createApiKey(em, merchant.id, "test", [...scopes]);
  return {
    base: `http://127.0.0.1:${port}`,
    rpcUrl: `http://127.0.0.1:${rpcPort}`,
    inspector: `127.0.0.1:${inspectPort}`,
    servicePid: main.child.pid as number,
    databaseUrl,
    database: decodeURIComponent(new URL(databaseUrl).pathname.slice(1)),
    db,
    masterKey,
    env,
    merchant: { id: merchant.id, key: key.api_key },
    exchangeRequests: () => exchanges.all.reduce((n, e) => n + e.requests, 0),
    processes,
    spawn: (roles) => spawn(roles),
  };
}
