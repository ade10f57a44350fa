// A private 3-node nats-server cluster with JetStream on loopback, for tests that lose a server.
//
//   const cluster = await startNatsCluster(t);      // n1, n2, n3; resolves once JetStream has a meta leader
//   NATS_URL: cluster.url                           // "nats://127.0.0.1:p1,nats://127.0.0.1:p2,…"
//   await cluster.kill("n2");                       // SIGKILL; resolves once it has exited
//   await cluster.start("n2");                      // same ports and store directory
//
// Every node is SIGKILLed and its store removed at teardown.
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { reachable } from "../../services/platform/reachable.ts";
import { freePort, natsServerBinary } from "./processes.ts";

interface Teardown {
  teardown(fn: () => unknown): void;
}

export interface ClusterNode {
  /** The server name (`--server_name`), as stream info reports leaders and replicas. */
  name: string;
  port: number;
  clusterPort: number;
  url: string;
  storeDir: string;
  running(): boolean;
  /** stderr so far (the last 8 KiB), for failure messages. */
  output(): string;
}

export interface NatsCluster {
  /** The cluster name (`--cluster_name`). */
  name: string;
  nodes: ClusterNode[];
  /** Every node's client URL, comma-separated: a NATS_URL. */
  url: string;
  node(name: string): ClusterNode;
  /** SIGKILLs the node; resolves once it has exited. */
  kill(name: string): Promise<void>;
  /** Starts the node again on its ports and store; resolves once it accepts connections. */
  start(name: string): Promise<void>;
  /** Resolves once JetStream answers an account info through the running nodes (a meta leader exists). */
  waitForMetaLeader(timeoutMs?: number): Promise<void>;
}

function exitOf(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once("exit", () => resolve());
    child.once("error", () => resolve()); // it never ran
  });
}

/** `size` nodes (n1…), each with JetStream, its own store in a temp dir, routes to all the others. */
export async function startNatsCluster(t: Teardown, o: { size?: number; timeoutMs?: number } = {}): Promise<NatsCluster> {
  const size = o.size ?? 3;
  const clusterName = `test-${randomBytes(3).toString("hex")}`;
  const bin = natsServerBinary();
  const ports: { port: number; clusterPort: number }[] = [];
  // freePort closes its probe at once: take all ports first, so no two nodes get the same one.
  const taken = new Set<number>();
  while (ports.length < size) {
    const port = await freePort();
    const clusterPort = await freePort();
    if (taken.has(port) || taken.has(clusterPort) || port === clusterPort) continue;
    taken.add(port).add(clusterPort);
    ports.push({ port, clusterPort });
  }
  const routes = ports.map((p) => `nats://127.0.0.1:${p.clusterPort}`);

  const children = new Map<string, ChildProcess>();
  const outputs = new Map<string, string>();
  const nodes: ClusterNode[] = ports.map(({ port, clusterPort }, i) => {
    const name = `n${i + 1}`;
    return {
      name,
      port,
      clusterPort,
      url: `nats://127.0.0.1:${port}`,
      storeDir: mkdtempSync(path.join(tmpdir(), `test-nats-${name}-`)),
      running: () => {
        const c = children.get(name);
        return c !== undefined && c.exitCode === null && c.signalCode === null;
      },
      output: () => outputs.get(name) ?? "",
    };
  });
  const node = (name: string) => {
    const n = nodes.find((x) => x.name === name);
    if (!n) throw new Error(`no cluster node ${name} (nodes: ${nodes.map((x) => x.name).join(", ")})`);
    return n;
  };

  t.teardown(async () => {
    for (const c of children.values()) {
      if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
    }
    await Promise.all([...children.values()].map(exitOf));
    children.clear();
    for (const n of nodes) rmSync(n.storeDir, { recursive: true, force: true });
  });

  const start = async (name: string) => {
    const n = node(name);
    if (n.running()) throw new Error(`nats-server ${name} is already running`);
    const args = [
      "-js",
      "-a", "127.0.0.1",
      "-p", String(n.port),
      "-sd", n.storeDir,
      "--server_name", n.name,
      "--cluster_name", clusterName,
      "--cluster", `nats://127.0.0.1:${n.clusterPort}`,
      "--routes", routes.filter((r) => r !== `nats://127.0.0.1:${n.clusterPort}`).join(","),
    ];
    const c = spawn(bin, args, { stdio: ["ignore", "ignore", "pipe"] });
    children.set(name, c);
    c.stderr!.on("data", (d: Buffer) => outputs.set(name, ((outputs.get(name) ?? "") + d.toString()).slice(-8192)));
    let spawnError: Error | undefined;
    c.once("error", (err) => (spawnError = err));
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline) {
      if (spawnError) throw new Error(`could not run ${bin}: ${spawnError.message}`);
      if (!n.running()) throw new Error(`nats-server ${name} exited: ${n.output().trim().split("\n").slice(-3).join(" | ")}`);
      if (await reachable("127.0.0.1", n.port)) return;
      await sleep(50);
    }
    throw new Error(`nats-server ${name} did not listen on ${n.port} within 10 s: ${n.output().slice(-1000)}`);
  };

  const kill = async (name: string) => {
    const c = children.get(name);
    if (!c) return;
    if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
    await exitOf(c);
  };

  const waitForMetaLeader = async (timeoutMs = 30_000) => {
    const servers = nodes.filter((n) => n.running()).map((n) => n.url);
    const nc = await connect({ servers, timeout: 2000 });
    let last = "";
    try {
      // A small API timeout: a request asked before the election ends is not answered at all.
      const jsm = await jetstreamManager(nc, { timeout: 1000, checkAPI: false });
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        try {
          await jsm.getAccountInfo();
          return;
        } catch (err) {
          last = (err as Error).message;
        }
        if (Date.now() > deadline) {
          throw new Error(`JetStream of cluster ${clusterName} has no meta leader within ${timeoutMs} ms (${last}): ${nodes.map((n) => `${n.name}: ${n.output().slice(-300)}`).join(" || ")}`);
        }
        await sleep(200);
      }
    } finally {
      await nc.close();
    }
  };

  await Promise.all(nodes.map((n) => start(n.name)));
  await waitForMetaLeader(o.timeoutMs ?? 30_000);
  return { name: clusterName, nodes, url: nodes.map((n) => n.url).join(","), node, kill, start, waitForMetaLeader };
}
