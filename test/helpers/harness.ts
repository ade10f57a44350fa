import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import pg from "pg";
import { HDKey } from "@scure/bip32";
import { streamNames } from "../../services/delivery/jetstream.ts";
import { natsServers } from "../../services/platform/nats.ts";
import { createApiKey, createMerchant } from "../../services/auth/admin.ts";
import type { Environment, Scope } from "../../services/auth/keys.ts";
import { scopes as allScopes } from "../../services/auth/keys.ts";
import { allRoles, startApp, type App, type Role } from "../../services/app/app.ts";
import { loadConfig, type Config } from "../../services/platform/config.ts";
import { createLogger, type Logger } from "../../services/platform/logger.ts";
import { networks } from "../../services/vocabulary/assets.ts";

/**
 * Each test file gets its own database on the machine's PostgreSQL (dropped
 * afterwards) and its own JetStream prefix, so runs never collide.
 * TEST_DATABASE_SERVER_URL names the server (default: the local one).
 */
export const serverUrl = process.env.TEST_DATABASE_SERVER_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
export const natsUrl = process.env.TEST_NATS_URL ?? "nats://127.0.0.1:4222";

export interface Teardown {
  teardown(fn: () => unknown): void;
}

export function uniqueName(prefix: string): string {
  return `${prefix}_${Date.now().toString(36)}_${randomBytes(4).toString("hex")}`;
}

export async function createTestDatabase(t: Teardown): Promise<string> {
  const name = uniqueName("pit");
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  await admin.query(`create database ${name}`);
  await admin.end();
  t.teardown(async () => {
    const c = new pg.Client({ connectionString: serverUrl });
    await c.connect();
    await c.query(`drop database if exists ${name} with (force)`);
    await c.end();
  });
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

/** Removes a test run's delivery stream (and its consumer) and its prefix claim from the shared NATS. */
export async function deleteStream(prefix: string, servers = natsUrl): Promise<void> {
  // A test's private NATS may already be gone, and its streams with it.
  const nc = await connect({ servers: natsServers(servers), reconnect: false }).catch(() => undefined);
  if (!nc) return;
  try {
    const jsm = await jetstreamManager(nc);
    const names = streamNames(prefix);
    await jsm.streams.delete(names.stream).catch(() => undefined);
    await jsm.streams.delete(names.claimStream).catch(() => undefined);
  } finally {
    await nc.close();
  }
}

export interface TestApp {
  app: App;
  /** The run's JetStream prefix. */
  prefix: string;
  masterKey: Buffer;
  config: Config;
  base: string;
  rpcUrl: string;
  databaseUrl: string;
}

/**
 * Per-key rate limits lifted: a test sends requests as fast as the machine goes, and one that is
 * not about the limits must not meet them on a fast machine (api-rate-limits.test.ts sets its own).
 */
const unlimitedKeys = { API_READ_RATE_LIMIT: "1000000", API_WRITE_RATE_LIMIT: "1000000" };

/** Tests reach no exchange: the development source unless a test points RATE_SOURCES at its own fakes. */
const offlineRates = { RATE_SOURCES: "fixed" };

/**
 * Tests report their payments themselves (ObservationService, the sandbox, ChainService as a
 * watcher of their own), so every network counts as followed, as an operator with such watchers
 * names them: Live creates are taken, Test intents carry no notice. A test of which chains are
 * followed (silent-networks, readiness) sets OPERATOR_WATCHED_NETWORKS itself, "" for none.
 */
export const operatorWatchedEverywhere = { OPERATOR_WATCHED_NETWORKS: networks.join(",") };

export async function startTestApp(
  t: Teardown,
  env: Record<string, string> = {},
  /** Unset: every role, the watcher only when `env` configures a chain endpoint (as `npm start`). */
  roles?: readonly Role[],
  /** The master key (SECRET_ENCRYPTION_KEY); give the same one to other processes of the same system. */
  masterKey: Buffer = randomBytes(32),
  /** The app's logger (default: TEST_LOG_LEVEL, silent unless set, on stderr); a test that reads the app's log lines passes its own. */
  logger?: Logger,
): Promise<TestApp> {
  roles ??= allRoles.filter((r) => r !== "watcher" || Object.keys(env).some((k) => k.endsWith("_RPC_URL") && k !== "RPC_URL"));
  // TEST_SPLIT=1 runs the same tests against a gateway that reaches the services over gRPC.
  if (process.env.TEST_SPLIT === "1" && roles.includes("gateway") && roles.includes("rpc")) {
    return startSplitTestApp(t, env, roles.filter((r) => r !== "gateway"), masterKey);
  }
  // DATABASE_URL: a database of the test's own; JETSTREAM_PREFIX "": the installation's own prefix.
  const databaseUrl = env.DATABASE_URL ?? (await createTestDatabase(t));
  const configured = env.JETSTREAM_PREFIX ?? uniqueName("t");
  const config = loadConfig({
    PORT: "0",
    RPC_PORT: "0",
    OPS_PORT: "0",
    CHECKOUT_BASE_URL: "https://checkout.example.test",
    ...unlimitedKeys,
    ...offlineRates,
    ...operatorWatchedEverywhere,
    ...env,
    JETSTREAM_PREFIX: configured,
  });
  const app = await startApp({
    config,
    logger: logger ?? createLogger(process.env.TEST_LOG_LEVEL ?? "silent", 2),
    databaseUrl,
    natsUrl: config.natsUrl ?? natsUrl,
    masterKey,
    roles,
  });
  const prefix = app.jetstreamPrefix ?? configured;
  t.teardown(async () => {
    await app.stop();
    await deleteStream(prefix, config.natsUrl ?? natsUrl);
  });
  return {
    app,
    prefix,
    masterKey,
    config,
    base: `http://127.0.0.1:${app.ports.gateway}`,
    rpcUrl: `http://127.0.0.1:${app.ports.rpc}`,
    databaseUrl,
  };
}

export interface SplitTestApp extends TestApp {
  /** The process-like app with the rpc role (and the other non-gateway roles). */
  rpcApp: App;
  /** The gateway-only app, calling rpcApp over gRPC (RPC_URL). */
  gatewayApp: App;
  /** Stops the rpc app alone (idempotent), leaving the gateway up. */
  stopRpc(): Promise<void>;
}

/**
 * Two apps sharing one database and master key, as separate deployments would:
 * `roles` (rpc among them) in one, the gateway alone in the other with RPC_URL
 * pointing at the first. `base` is the gateway's; `app` stands for the whole
 * system (the rpc app's database and NATS, both apps' ports, stop() stops both).
 */
export async function startSplitTestApp(
  t: Teardown,
  env: Record<string, string> = {},
  roles: readonly Role[] = ["rpc", "worker", "scheduler"],
  masterKey: Buffer = randomBytes(32),
): Promise<SplitTestApp> {
  if (!roles.includes("rpc") || roles.includes("gateway")) throw new Error("startSplitTestApp: the first app needs the rpc role and not the gateway");
  const databaseUrl = env.DATABASE_URL ?? (await createTestDatabase(t));
  const configured = env.JETSTREAM_PREFIX ?? uniqueName("t");
  const logger = createLogger(process.env.TEST_LOG_LEVEL ?? "silent", 2);
  const rpcConfig = loadConfig({
    PORT: "0",
    RPC_PORT: "0",
    OPS_PORT: "0",
    CHECKOUT_BASE_URL: "https://checkout.example.test",
    ...unlimitedKeys,
    ...offlineRates,
    ...operatorWatchedEverywhere,
    ...env,
    JETSTREAM_PREFIX: configured,
  });
  const natsServers = rpcConfig.natsUrl ?? natsUrl;
  const rpcApp = await startApp({ config: rpcConfig, logger, databaseUrl, natsUrl: natsServers, masterKey, roles });
  const rpcUrl = `http://127.0.0.1:${rpcApp.ports.rpc}`;
  let rpcStopped: Promise<void> | undefined;
  const stopRpc = () => (rpcStopped ??= rpcApp.stop());
  const prefix = rpcApp.jetstreamPrefix ?? configured;
  t.teardown(async () => {
    await stopRpc();
    await deleteStream(prefix, natsServers);
  });
  const gatewayConfig = loadConfig({
    PORT: "0",
    RPC_PORT: "0",
    OPS_PORT: "0",
    CHECKOUT_BASE_URL: "https://checkout.example.test",
    ...unlimitedKeys,
    ...offlineRates,
    ...operatorWatchedEverywhere,
    ...env,
    JETSTREAM_PREFIX: configured,
    RPC_URL: rpcUrl,
  });
  const gatewayApp = await startApp({ config: gatewayConfig, logger, databaseUrl, natsUrl: natsServers, masterKey, roles: ["gateway"] });
  let gatewayStopped: Promise<void> | undefined;
  const stopGateway = () => (gatewayStopped ??= gatewayApp.stop());
  t.teardown(stopGateway);
  const app: App = {
    db: rpcApp.db,
    nats: rpcApp.nats,
    ports: { gateway: gatewayApp.ports.gateway, rpc: rpcApp.ports.rpc, ops: rpcApp.ports.ops },
    jetstreamPrefix: rpcApp.jetstreamPrefix,
    async stop() {
      await stopGateway();
      await stopRpc();
    },
  };
  return {
    app,
    prefix,
    masterKey,
    config: rpcConfig,
    base: `http://127.0.0.1:${gatewayApp.ports.gateway}`,
    rpcUrl,
    databaseUrl,
    rpcApp,
    gatewayApp,
    stopRpc,
  };
}

export interface Credentials {
  merchant: string;
  key: string;
  keyId: string;
}

export async function merchantWithKey(
  app: App,
  environment: Environment = "test",
  scopes: readonly Scope[] = allScopes,
  merchant?: string,
): Promise<Credentials> {
  const em = app.db.em.fork();
  const id = merchant ?? (await createMerchant(em, "Test Shop")).id;
  const key = await createApiKey(em, id, environment, [...scopes]);
  if (environment === "live") await giveLiveAccountKey(app, id, "ethereum");
  return { merchant: id, key: key.api_key, keyId: key.id };
}

/**
 * Live intents need the merchant's own deposit-address source: an account xpub
 * (m/44'/60'/0') of a random seed, as a merchant's wallet would export it.
 */
export async function giveLiveAccountKey(app: App, merchant: string, network: "ethereum" | "polygon" | "tron" = "ethereum"): Promise<string> {
  const coin = network === "tron" ? 195 : 60;
  const xpub = HDKey.fromMasterSeed(randomBytes(32)).derive(`m/44'/${coin}'/0'`).publicExtendedKey;
  await app.db.em.fork().execute(
    `insert into address_sources (merchant_id, environment, network, account_key, next_index, created_at, updated_at)
     values (?, 'live', ?, ?, 0, now(), now()) on conflict do nothing`,
    [merchant, network, xpub],
  );
  return xpub;
}

export interface ApiResponse {
  status: number;
  headers: Headers;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  body: any;
}

/** A REST call; JSON bodies are serialized unless given as a string or Buffer. */
export async function call(
  base: string,
  method: string,
  path: string,
  options: { key?: string; body?: unknown; headers?: Record<string, string>; idempotencyKey?: string } = {},
): Promise<ApiResponse> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.key) headers.authorization = `Bearer ${options.key}`;
  if (options.idempotencyKey) headers["idempotency-key"] = options.idempotencyKey;
  let body: string | Buffer | undefined;
  if (options.body !== undefined) {
    body = typeof options.body === "string" || Buffer.isBuffer(options.body) ? options.body : JSON.stringify(options.body);
    headers["content-type"] ??= "application/json";
  }
  const res = await fetch(base + path, { method, headers, body });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON
  }
  return { status: res.status, headers: res.headers, body: parsed };
}

let counter = 0;
export function idemKey(): string {
  return `test-${process.pid}-${Date.now()}-${counter++}`;
}

export const sampleIntent = { network: "ethereum", asset: "USDC", requested_amount: "12.50" };

/** Polls `check` until it returns a value other than undefined/false, or throws with `what` (and the last value). */
export async function until<T>(what: string, check: () => Promise<T | undefined | false>, timeoutMs: number, describe?: () => string): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms${describe ? ` (${describe()})` : ""}`);
    await sleep(100);
  }
}

/** Per-minute limits count in fixed minutes: start well inside one, so a test's calls share it. */
export async function freshMinute(): Promise<void> {
  const left = 60_000 - (Date.now() % 60_000);
  if (left < 8_000) await sleep(left + 100);
}
