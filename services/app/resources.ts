import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { redactUserinfo, type Config } from "../platform/config.ts";
import { freePort } from "../platform/listen.ts";
import { randomBase62 } from "../platform/ids.ts";
import type { Logger } from "../platform/logger.ts";
import { reachable } from "../platform/reachable.ts";
import { startEmbeddedNats, type EmbeddedNats } from "./embedded-nats.ts";
import { clusterDirFor, startEmbeddedPostgres, type EmbeddedDatabase } from "./embedded-postgres.ts";

/** Settings of the embedded default, chosen once and kept under DATA_DIR. */
interface EmbeddedSettings {
  pgPort: number;
  pgUser: string;
  pgPassword: string;
  natsPort: number;
  /** Where the cluster lives when not under DATA_DIR/pg (root, with DATA_DIR out of the server user's reach). */
  pgDataDir?: string;
}

function settingsFile(dataDir: string): string {
  return path.join(dataDir, "embedded.json");
}

function readSettings(dataDir: string): EmbeddedSettings | undefined {
  const file = settingsFile(dataDir);
  return existsSync(file) ? (JSON.parse(readFileSync(file, "utf8")) as EmbeddedSettings) : undefined;
}

function writeSettings(dataDir: string, settings: EmbeddedSettings) {
  mkdirSync(dataDir, { recursive: true, mode: 0o755 });
  writeFileSync(settingsFile(dataDir), JSON.stringify(settings, null, 2) + "\n", { mode: 0o600 });
}

async function embeddedSettings(dataDir: string): Promise<EmbeddedSettings> {
  const existing = readSettings(dataDir);
  if (existing) return existing;
  const settings = { pgPort: await freePort(), pgUser: "payments", pgPassword: randomBase62(24), natsPort: await freePort() };
  writeSettings(dataDir, settings);
  return settings;
}

/** The cluster's folder: DATA_DIR/pg, or the one recorded (or now chosen) outside DATA_DIR. */
function clusterDir(dataDir: string, s: EmbeddedSettings): string {
  if (s.pgDataDir) return s.pgDataDir;
  const elsewhere = clusterDirFor(dataDir);
  if (!elsewhere) return path.join(dataDir, "pg");
  writeSettings(dataDir, { ...s, pgDataDir: elsewhere });
  return elsewhere;
}

/** Where a server started from this checkout with DATABASE_URL records it, for the CLIs beside it. */
const serverDatabaseFile = (dataDir: string) => path.join(dataDir, "server-database.json");

/**
 * A server records the database it uses (DATABASE_URL, or none for the embedded one) under DATA_DIR,
 * so that the admin and ops CLIs run beside it without DATABASE_URL find the same database rather
 * than starting the embedded one. The file holds the URL as given (credentials included), 0600.
 */
export function recordServerDatabase(config: Config): void {
  const file = serverDatabaseFile(config.dataDir);
  if (!config.databaseUrl) {
    rmSync(file, { force: true });
    return;
  }
  mkdirSync(config.dataDir, { recursive: true });
  writeFileSync(file, JSON.stringify({ databaseUrl: config.databaseUrl }), { mode: 0o600 });
}

/** The database a CLI uses: DATABASE_URL; else the one the server beside it recorded; else the embedded one. */
export function cliDatabase(config: Config): { config: Config; describe(embedded: string | undefined): string } {
  if (config.databaseUrl) return { config, describe: () => `${redactUserinfo(config.databaseUrl as string)} (DATABASE_URL)` };
  const file = serverDatabaseFile(config.dataDir);
  if (existsSync(file)) {
    const recorded = (JSON.parse(readFileSync(file, "utf8")) as { databaseUrl?: string }).databaseUrl;
    if (recorded) return { config: { ...config, databaseUrl: recorded }, describe: () => `${redactUserinfo(recorded)} (the server's, recorded in ${file}; set DATABASE_URL to use another)` };
  }
  return { config, describe: (embedded) => `embedded PostgreSQL under ${embedded ?? config.dataDir} (no DATABASE_URL, and no server started here with one)` };
}

export interface Resources {
  databaseUrl: string;
  /** The embedded cluster's folder, when that is the database. */
  embeddedDatabase?: string;
  stopDatabase(): Promise<void>;
}

/** DATABASE_URL, or the embedded PostgreSQL under DATA_DIR (started, or shared if already running). */
export async function resolveDatabase(config: Config, logger: Logger): Promise<Resources> {
  if (config.databaseUrl) return { databaseUrl: config.databaseUrl, stopDatabase: async () => {} };
  const s = await embeddedSettings(config.dataDir);
  const dir = clusterDir(config.dataDir, s);
  logger.info({ dataDir: dir, port: s.pgPort }, "DATABASE_URL is not set: using the embedded PostgreSQL");
  const db: EmbeddedDatabase = await startEmbeddedPostgres({
    dataDir: dir,
    port: s.pgPort,
    user: s.pgUser,
    password: s.pgPassword,
    database: "payments",
  });
  return { databaseUrl: db.url, embeddedDatabase: dir, stopDatabase: db.stop };
}

/**
 * NATS_URL (one server, or a cluster's servers comma-separated: nats.ts splits it), or 127.0.0.1:4222
 * when it answers; undefined when neither: the embedded default applies.
 */
async function externalNats(config: Config): Promise<string | undefined> {
  if (config.natsUrl) return config.natsUrl;
  if (await reachable("127.0.0.1", 4222)) return "nats://127.0.0.1:4222";
  return undefined;
}

/**
 * Where the server finds NATS, without starting anything (for tools such as the ops CLI):
 * as resolveNats, but the embedded default only by the port kept under DATA_DIR.
 */
export async function locateNats(config: Config): Promise<string> {
  const external = await externalNats(config);
  if (external) return external;
  const s = readSettings(config.dataDir);
  return s ? `nats://127.0.0.1:${s.natsPort}` : "nats://127.0.0.1:4222";
}

/** NATS_URL; unset: 127.0.0.1:4222 when it answers, else nats-server from PATH under DATA_DIR. */
export async function resolveNats(config: Config, logger: Logger): Promise<{ url: string; stop(): Promise<void> }> {
  const external = await externalNats(config);
  if (external) return { url: external, stop: async () => {} };
  const s = await embeddedSettings(config.dataDir);
  logger.info({ port: s.natsPort }, "NATS_URL is not set and 127.0.0.1:4222 does not answer: starting nats-server");
  const nats: EmbeddedNats = await startEmbeddedNats(config.dataDir, s.natsPort);
  return nats;
}
