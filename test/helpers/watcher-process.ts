// The watcher as its own process (`main.ts watcher`), reaching the core over gRPC with an
// internal credential: its output kept, SIGKILLed at teardown if still running.
import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";

interface Teardown {
  teardown(fn: () => unknown): void;
}

export interface WatcherProcess {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

const root = path.resolve(import.meta.dirname, "../..");

/** Starts a watcher with `env` (the core's RPC_URL, a credential, the node URLs) and a fast poll and lease. */
export function spawnWatcher(t: Teardown, env: Record<string, string>): WatcherProcess {
  const child = spawn(process.execPath, [path.join(root, "services/app/main.ts"), "watcher"], {
    cwd: root,
    env: {
      PATH: process.env.PATH,
      WATCHER_POLL_MS: "100",
      WATCHER_LEASE_SECONDS: "5",
      OPS_PORT: "0",
      LOG_LEVEL: "info",
      DATA_DIR: path.join(root, ".data-test-watcher"),
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout?.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr?.on("data", (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    return exited;
  });
  return { child, output: () => out, exited };
}
