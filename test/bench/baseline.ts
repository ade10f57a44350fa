import { spawn } from "node:child_process";
import path from "node:path";
import { freePort } from "../helpers/processes.ts";

/** The raw baseline for a create (baseline-insert-server.ts) as its own process: its URL, its pid (for its CPU time) and a stop. */
export async function startBaselineInsert(databaseUrl: string, merchantId: string): Promise<{ url: string; pid: number; stop(): void }> {
  const port = await freePort();
  const child = spawn(process.execPath, [path.join(import.meta.dirname, "baseline-insert-server.ts"), String(port)], {
    env: { ...process.env, DATABASE_URL: databaseUrl, MERCHANT_ID: merchantId },
    stdio: ["ignore", "pipe", "inherit"],
  });
  await new Promise<void>((resolve, reject) => {
    child.stdout!.once("data", () => resolve());
    child.once("exit", (code) => reject(new Error(`baseline server exited (${code})`)));
  });
  return { url: `http://127.0.0.1:${port}/`, pid: child.pid as number, stop: () => child.kill("SIGKILL") };
}
