import { spawn, spawnSync } from "node:child_process";
import { mkdirSync } from "node:fs";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { reachable } from "../platform/reachable.ts";

export interface EmbeddedNats {
  url: string;
  stop(): Promise<void>;
}

/** `nats-server -js` from PATH, storing under dataDir/nats, stopped with this process. */
export async function startEmbeddedNats(dataDir: string, port: number): Promise<EmbeddedNats> {
  if (spawnSync("nats-server", ["--version"]).error) {
    throw new Error(
      "NATS is not reachable and nats-server is not on PATH: install it (Debian: apt-get install nats-server) or set NATS_URL",
    );
  }
  const storeDir = path.join(dataDir, "nats");
  mkdirSync(storeDir, { recursive: true });
  const child = spawn("nats-server", ["-js", "-a", "127.0.0.1", "-p", String(port), "-sd", storeDir], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  let output = "";
  child.stderr.on("data", (d: Buffer) => (output = (output + d.toString()).slice(-2000)));
  const kill = () => child.kill("SIGTERM");
  process.on("exit", kill);
  for (let i = 0; i < 100; i++) {
    if (child.exitCode !== null) throw new Error(`nats-server exited: ${output.trim().split("\n").pop()}`);
    if (await reachable("127.0.0.1", port)) {
      return {
        url: `nats://127.0.0.1:${port}`,
        async stop() {
          process.removeListener("exit", kill);
          if (child.exitCode !== null) return;
          const exited = new Promise((r) => child.once("exit", r));
          kill();
          await exited;
        },
      };
    }
    await sleep(100);
  }
  kill();
  throw new Error("nats-server did not start listening within 10 s");
}
