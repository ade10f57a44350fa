// Child processes for resilience tests: service roles run by `services/app/main.ts`,
// and a private `nats-server` that a test may stop and start again.
//
//   const w = spawnService(t, ["worker"], { DATABASE_URL: …, NATS_URL: … });
//   await w.started;                 // the start-up banner was printed
//   await w.kill("SIGKILL");         // resolves once it has exited
//
//   const nats = await startNatsServer(t);   // nats-server -js on a free port, store in a temp dir
//   await nats.stop(); await nats.start();   // same port and store directory
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { accessSync, constants, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { reachable } from "../../services/platform/reachable.ts";
import { scopes } from "../../services/auth/keys.ts";
import { freePort } from "../../services/platform/listen.ts";
import { createTestDatabase, deleteStream, natsUrl, operatorWatchedEverywhere, uniqueName } from "./harness.ts";
import { makeTestCa, startReceiver, type Receiver, type Responder } from "./receiver.ts";
import { hookHost } from "./webhooks.ts";

export { freePort };

interface Teardown {
  teardown(fn: () => unknown): void;
}

const root = path.resolve(import.meta.dirname, "../..");


function exitOf(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve) => {
    child.once("exit", (code) => resolve(code));
    child.once("error", () => resolve(null)); // it never ran
  });
}

export interface ServiceProcess {
  child: ChildProcess;
  /** stdout and stderr so far (the last 64 KiB), for failure messages. */
  output(): string;
  /** stdout and stderr apart, in full. */
  stdout(): string;
  stderr(): string;
  /** Resolves with the exit code (null when killed by a signal) once the process has exited. */
  exited: Promise<number | null>;
  /** Resolves once the start-up banner is printed; rejects if the process exits first or takes over 30 s. */
  started: Promise<void>;
  /** Sends the signal (if it still runs) and resolves once the process has exited. */
  kill(signal?: NodeJS.Signals): Promise<void>;
}

/**
 * Runs `node services/app/main.ts <roles>` (of this checkout, or of the copy in `dir`, from that
 * folder) with this process's Node binary, or with `npm: true` `npm start -- <roles>` as a user
 * types it (npm from PATH), the given environment on top of ours (without NODE_OPTIONS and tap's
 * variables; a variable given as undefined is removed), and SIGKILLs it at teardown if it still runs.
 */
export function spawnService(
  t: Teardown,
  roles: readonly string[],
  env: Record<string, string | undefined>,
  o: { dir?: string; npm?: boolean } = {},
): ServiceProcess {
  // Tests reach no exchange: the development rate source unless the test's env names others; and
  // they report payments themselves, so every network counts as followed (harness.ts says why).
  const base: Record<string, string> = { RATE_SOURCES: "fixed", ...operatorWatchedEverywhere };
  for (const [k, v] of Object.entries(process.env)) {
    if (v === undefined || k === "NODE_OPTIONS" || k.startsWith("TAP") || k.startsWith("_TAP")) continue;
    base[k] = v;
  }
  const dir = o.dir ?? root;
  const [command, args] = o.npm
    ? ["npm", ["start", ...(roles.length > 0 ? ["--", ...roles] : [])]]
    : [process.execPath, [path.join(dir, "services/app/main.ts"), ...roles]];
  const child = spawn(command, args, {
    cwd: dir,
    env: { ...base, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  const apart = { stdout: "", stderr: "" };
  const append = (d: Buffer) => (out = (out + d.toString()).slice(-65_536));
  child.stdout!.on("data", append);
  child.stderr!.on("data", append);
  child.stdout!.on("data", (d: Buffer) => (apart.stdout += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (apart.stderr += d.toString()));
  const exited = exitOf(child);
  const started = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${roles.join(" ")} did not start within 30 s: ${out.slice(-2000)}`)), 30_000);
    const check = () => {
      if (!out.includes("Payment Intent service:")) return;
      clearTimeout(timer);
      resolve();
    };
    child.stdout!.on("data", check);
    void exited.then(() => {
      clearTimeout(timer);
      reject(new Error(`${roles.join(" ")} exited before it started (${child.exitCode ?? child.signalCode}): ${out.slice(-2000)}`));
    });
  });
  started.catch(() => undefined);
  const kill = async (signal: NodeJS.Signals = "SIGKILL") => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    await exited;
  };
  t.teardown(() => kill("SIGKILL"));
  return { child, output: () => out, stdout: () => apart.stdout, stderr: () => apart.stderr, exited, started, kill };
}

/** nats-server from PATH, else /usr/sbin/nats-server (Debian's package). */
export function natsServerBinary(): string {
  for (const dir of (process.env.PATH ?? "").split(path.delimiter)) {
    if (!dir) continue;
    const candidate = path.join(dir, "nats-server");
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return "/usr/sbin/nats-server";
}

export interface NatsServer {
  url: string;
  port: number;
  storeDir: string;
  /** Starts it (again) on the same port and store directory; resolves once it accepts connections. */
  start(): Promise<void>;
  /** SIGTERM; resolves once it has exited. */
  stop(): Promise<void>;
}

/** A private `nats-server -js` on a free loopback port with its store in a temp dir; killed and removed at teardown. */
export async function startNatsServer(t: Teardown): Promise<NatsServer> {
  const port = await freePort();
  const storeDir = mkdtempSync(path.join(tmpdir(), "test-nats-"));
  const bin = natsServerBinary();
  let child: ChildProcess | undefined;
  let out = "";
  const stop = async () => {
    const c = child;
    if (!c) return;
    child = undefined;
    const exited = exitOf(c);
    if (c.exitCode === null && c.signalCode === null) c.kill("SIGTERM");
    await exited;
  };
  const start = async () => {
    if (child) throw new Error("nats-server is already running");
    const c = spawn(bin, ["-js", "-a", "127.0.0.1", "-p", String(port), "-sd", storeDir], { stdio: ["ignore", "ignore", "pipe"] });
    child = c;
    c.stderr!.on("data", (d: Buffer) => (out = (out + d.toString()).slice(-4000)));
    let spawnError: Error | undefined;
    c.once("error", (err) => (spawnError = err));
    for (let i = 0; i < 200; i++) {
      if (spawnError) throw new Error(`could not run ${bin}: ${spawnError.message}`);
      if (c.exitCode !== null || c.signalCode !== null) throw new Error(`nats-server exited: ${out.trim().split("\n").slice(-3).join(" | ")}`);
      if (await reachable("127.0.0.1", port)) return;
      await sleep(50);
    }
    throw new Error(`nats-server did not listen on ${port} within 10 s: ${out.slice(-1000)}`);
  };
  t.teardown(async () => {
    const c = child;
    child = undefined;
    if (c && c.exitCode === null && c.signalCode === null) {
      const exited = exitOf(c);
      c.kill("SIGKILL");
      await exited;
    }
    rmSync(storeDir, { recursive: true, force: true });
  });
  await start();
  return { url: `nats://127.0.0.1:${port}`, port, storeDir, start, stop };
}

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs one of the CLIs (e.g. "services/app/admin.ts") as a new user would, with only PATH and `env`. */
export function runCli(script: string, env: Record<string, string>, ...args: string[]): Promise<CliRun> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [path.join(root, script), ...args],
      { cwd: root, env: { PATH: process.env.PATH ?? "", LOG_LEVEL: "silent", ...env }, timeout: 30_000, encoding: "utf8" },
      (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === "number" ? err.code : null) : 0, stdout, stderr }),
    );
  });
}

export interface ServiceSystem {
  /** The environment every start of the service gets: same database, prefix, key and ports. */
  env: Record<string, string>;
  /** The REST gateway's base URL (a fixed port, the same after a restart). */
  base: string;
  databaseUrl: string;
  prefix: string;
  masterKey: Buffer;
  receiver: Receiver;
  /** The merchant and its all-scopes Test API key, made with the admin CLI. */
  creds: { merchant: string; key: string };
  /** Starts the service (all roles unless given) and resolves once it has printed its banner. */
  start(roles?: readonly string[]): Promise<ServiceProcess>;
  /** Runs the admin CLI against the system's database. */
  admin(...args: string[]): Promise<CliRun>;
}

/**
 * A whole system for child-process tests: its own database (dropped afterwards) and
 * JetStream prefix (deleted afterwards) on the shared PostgreSQL and NATS, a master key,
 * fixed free ports, and a local HTTPS webhook receiver reached as https://hooks.example.test
 * (WEBHOOK_CONNECT_TO, the CA in NODE_EXTRA_CA_CERTS). The service is started once to create
 * the schema; a merchant and a Test API key are made with the admin CLI.
 */
export async function serviceSystem(
  t: Teardown,
  o: { env?: Record<string, string>; respond?: Responder } = {},
): Promise<ServiceSystem & { first: ServiceProcess }> {
  const databaseUrl = await createTestDatabase(t);
  const prefix = uniqueName("t");
  t.teardown(() => deleteStream(prefix));
  const ca = await makeTestCa(t, [hookHost]);
  const receiver = await startReceiver(t, { key: ca.key, cert: ca.cert, respond: o.respond });
  const dataDir = mkdtempSync(path.join(tmpdir(), "test-service-"));
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  const ports = new Set<number>();
  while (ports.size < 3) ports.add(await freePort());
  const [port, rpcPort, opsPort] = [...ports];
  const masterKey = randomBytes(32);
  const env: Record<string, string> = {
    DATABASE_URL: databaseUrl,
    NATS_URL: natsUrl,
    JETSTREAM_PREFIX: prefix,
    SECRET_ENCRYPTION_KEY: masterKey.toString("hex"),
    WEBHOOK_CONNECT_TO: `${hookHost}:443:127.0.0.1:${receiver.port}`,
    NODE_EXTRA_CA_CERTS: ca.caFile,
    HOST: "127.0.0.1",
    PORT: String(port),
    RPC_PORT: String(rpcPort),
    OPS_PORT: String(opsPort),
    LOG_LEVEL: "warn",
    DATA_DIR: dataDir,
    ...o.env,
  };
  const start = async (roles: readonly string[] = ["rpc", "gateway", "worker", "scheduler"]) => {
    const p = spawnService(t, roles, env);
    await p.started;
    return p;
  };
  const admin = (...args: string[]) => runCli("services/app/admin.ts", { DATABASE_URL: databaseUrl, DATA_DIR: dataDir }, ...args);
  const first = await start();
  const merchant = await admin("merchant", "create", "--name", "Fault Test Shop");
  if (merchant.code !== 0) throw new Error(`admin merchant create: ${merchant.stderr}`);
  const merchantId: string = JSON.parse(merchant.stdout).id;
  const key = await admin("api-key", "create", "--merchant", merchantId, "--environment", "test", "--scopes", scopes.join(","));
  if (key.code !== 0) throw new Error(`admin api-key create: ${key.stderr}`);
  return {
    env,
    base: `http://127.0.0.1:${port}`,
    databaseUrl,
    prefix,
    masterKey,
    receiver,
    creds: { merchant: merchantId, key: JSON.parse(key.stdout).api_key },
    start,
    admin,
    first,
  };
}
