import { fork, type ChildProcess } from "node:child_process";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { makeTestCa, type TestCa } from "../helpers/receiver.ts";
import { freePort } from "../helpers/processes.ts";
import { EventProducer } from "./events.ts";
import { nowMs } from "./stats.ts";
import { startSystem, type Cleanup, type System } from "./system.ts";

export const benchHost = "hooks.bench.test";

export interface BenchReceiver {
  port: number;
  /** The receiver's process, for its CPU time. */
  pid: number;
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
export async function startBenchReceiver(cleanup: Cleanup, failFirst = 0, slow?: { prefix: string; ms: number }, downPrefix?: string): Promise<BenchReceiver> {
  const ca = await makeTestCa(cleanup, [benchHost]);
  const port = await freePort();
  const { writeFileSync } = await import("node:fs");
  const keyFile = path.join(ca.dir, "server.key.pem");
  const certFile = path.join(ca.dir, "server.cert.pem");
  writeFileSync(keyFile, ca.key);
  writeFileSync(certFile, ca.cert);
  const child = fork(path.join(import.meta.dirname, "receiver-server.ts"), [String(port), keyFile, certFile], {
    env: { ...process.env, FAIL_FIRST: String(failFirst), ...(slow ? { SLOW_PREFIX: slow.prefix, SLOW_MS: String(slow.ms) } : {}), ...(downPrefix ? { DOWN_PREFIX: downPrefix } : {}) },
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  cleanup.teardown(() => child.kill("SIGKILL"));
  await ask(child, "noop", "listening");
  return {
    port,
    pid: child.pid as number,
    ca,
    env: { WEBHOOK_CONNECT_TO: `${benchHost}:443:127.0.0.1:${port}`, NODE_EXTRA_CA_CERTS: ca.caFile },
    arrivals: async () => new Map(await ask<[string, number[]][]>(child, "arrivals", "arrivals")),
    reset: () => ask(child, "reset", "reset"),
  };
}

export interface WebhookSystem {
  system: System;
  receiver: BenchReceiver;
  /** The endpoint's signing secret. */
  secret: string;
  /** Records events (and their deliveries to the endpoint) straight into the outbox. */
  producer: EventProducer;
}

/**
 * A system of its own that delivers to a receiver process: the receiver (answering 503
 * to the first `failFirst` requests of each event), the service with `env`, one endpoint
 * on the receiver, and an event producer for it.
 */
export async function startWebhookSystem(cleanup: Cleanup, o: { failFirst?: number; env?: Record<string, string> } = {}): Promise<WebhookSystem> {
  const receiver = await startBenchReceiver(cleanup, o.failFirst ?? 0);
  const system = await startSystem(cleanup, { ...receiver.env, ...o.env });
  const created = await createBenchEndpoint(system, "/hooks");
  const producer = new EventProducer(system.databaseUrl, system.merchant.id, created.id);
  cleanup.teardown(() => producer.close());
  return { system, receiver, secret: created.secret, producer };
}

/** An endpoint at https://hooks.bench.test<path> for the merchant (the system's own by default), through the REST API. */
export async function createBenchEndpoint(
  system: Pick<System, "base" | "merchant">,
  path: string,
  merchant: { id: string; key: string } = system.merchant,
): Promise<{ id: string; secret: string }> {
  const res = await fetch(`${system.base}/api/v1/merchants/${merchant.id}/webhook-endpoints`, {
    method: "POST",
    headers: { authorization: `Bearer ${merchant.key}`, "content-type": "application/json" },
    body: JSON.stringify({ url: `https://${benchHost}${path}` }),
  });
  if (res.status !== 200) throw new Error(`create endpoint: ${res.status} ${await res.text()}`);
  const created = (await res.json()) as { data: { id: string; signing_secret: string } };
  return { id: created.data.id, secret: created.data.signing_secret };
}

/** Polls the receiver until every event in `ids` has arrived at least once; their arrivals. */
export async function waitForArrivals(receiver: BenchReceiver, ids: readonly string[], timeoutMs: number): Promise<Map<string, number[]>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const arrivals = await receiver.arrivals();
    if (ids.every((id) => arrivals.has(id))) return arrivals;
    if (Date.now() > deadline) {
      throw new Error(`${ids.filter((id) => !arrivals.has(id)).length} of ${ids.length} events not delivered within ${timeoutMs} ms`);
    }
    await sleep(100);
  }
}

/**
 * A merchant's steady events: 2 every 100 ms for `seconds` (`each` runs once a second beside them),
 * then each one's first request at the receiver, as ms after its commit.
 */
export async function steadyEvents(
  producer: EventProducer,
  receiver: BenchReceiver,
  seconds: number,
  each?: () => Promise<unknown>,
): Promise<{ commits: Map<string, number>; latencies: number[] }> {
  const commits = new Map<string, number>();
  const t0 = nowMs();
  for (let tick = 0; tick < seconds * 10; tick++) {
    const wait = t0 + tick * 100 - nowMs();
    if (wait > 0) await sleep(wait);
    const { ids, committedAt } = await producer.record(2);
    for (const id of ids) commits.set(id, committedAt);
    if (each && tick % 10 === 0) await each();
  }
  const arrivals = await waitForArrivals(receiver, [...commits.keys()], 120_000);
  return { commits, latencies: [...commits].map(([id, at]) => arrivals.get(id)![0]! - at) };
}
