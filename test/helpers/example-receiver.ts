// examples/receiver.mjs as a reader runs it: the file itself, from a directory holding hook.key and
// hook.crt for a made-up name (trusted by this process), listening on a port of its own.
import { spawn, type ChildProcess } from "node:child_process";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { reachable } from "../../services/platform/reachable.ts";
import { until } from "./harness.ts";
import { freePort } from "./processes.ts";
import { makeTestCa, trustTestCa } from "./receiver.ts";

export const exampleReceiverFile = path.resolve(import.meta.dirname, "../../examples/receiver.mjs");

type Teardown = { teardown(fn: () => unknown): void };

export interface ExampleReceiver {
  port: number;
  /** What every receiver started here printed, stdout and stderr. */
  printed(): string;
  /** Starts the file with this secret; resolves once it listens. */
  start(secret: string): Promise<ChildProcess>;
}

export async function exampleReceiver(t: Teardown, hookName: string): Promise<ExampleReceiver> {
  const ca = await makeTestCa(t, [hookName]);
  trustTestCa(ca.caPem);
  writeFileSync(path.join(ca.dir, "hook.key"), ca.key);
  writeFileSync(path.join(ca.dir, "hook.crt"), ca.cert);
  const port = await freePort();
  let printed = "";
  return {
    port,
    printed: () => printed,
    async start(secret) {
      const child = spawn(process.execPath, [exampleReceiverFile], {
        cwd: ca.dir,
        env: { PATH: process.env.PATH ?? "", WEBHOOK_SECRET: secret, HOOK_PORT: String(port) },
        stdio: ["ignore", "pipe", "pipe"],
      });
      child.stdout.on("data", (d: Buffer) => (printed += d.toString()));
      child.stderr.on("data", (d: Buffer) => (printed += d.toString()));
      t.teardown(() => void child.kill("SIGKILL"));
      await until("the example receiver to listen", async () => reachable("127.0.0.1", port), 15_000, () => printed);
      return child;
    },
  };
}
