import { fork, type ChildProcess } from "node:child_process";
import path from "node:path";
import { makeTestCa, type TestCa } from "../helpers/receiver.ts";
import { freePort } from "../helpers/processes.ts";
import type { Cleanup } from "./system.ts";

export const benchHost = "hooks.bench.test";

export interface BenchReceiver {
  port: number;
  ca: TestCa;
  /** The system's environment that points hooks.bench.test at this receiver. */
  env: Record<string, string>;
  arrivals(): Promise<Map<string, number[]>>;
  reset(): Promise<void>;
}

function ask<T>(child: ChildProcess, type: string, key: string): Promise<T> {
  return new Promise((resolve) => {
    const on = (m: Record<string, unknown>) => {
      if (!(key in m)) return;
      child.off("message", on);
      resolve(m[key] as T);
    };
    child.on("message", on);
    child.send({ type });
  });
}

/** An HTTPS receiver process with a test CA; the system reaches it as https://hooks.bench.test/. */
export async function startBenchReceiver(cleanup: Cleanup, failFirst = 0): Promise<BenchReceiver> {
  const ca = await makeTestCa(cleanup, [benchHost]);
  const port = await freePort();
  const { writeFileSync } = await import("node:fs");
  const keyFile = path.join(ca.dir, "server.key.pem");
  const certFile = path.join(ca.dir, "server.cert.pem");
  writeFileSync(keyFile, ca.key);
  writeFileSync(certFile, ca.cert);
  const child = fork(path.join(import.meta.dirname, "receiver-server.ts"), [String(port), keyFile, certFile], {
    env: { ...process.env, FAIL_FIRST: String(failFirst) },
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  cleanup.teardown(() => child.kill("SIGKILL"));
  await ask(child, "noop", "listening");
  return {
    port,
    ca,
    env: { WEBHOOK_CONNECT_TO: `${benchHost}:443:127.0.0.1:${port}`, NODE_EXTRA_CA_CERTS: ca.caFile },
    arrivals: async () => new Map(await ask<[string, number[]][]>(child, "arrivals", "arrivals")),
    reset: () => ask(child, "reset", "reset"),
  };
}
