// An endpoint's in-flight cap and its circuit hold across worker processes (issue 48): two
// workers (`main.ts worker` child processes, each reaching the receiver through its own TCP relay,
// so the test sees that both sent) and an endpoint that never answers. With the cap per process,
// each worker had WEBHOOK_ENDPOINT_CONCURRENCY attempts waiting on it, and each needed
// WEBHOOK_CIRCUIT_TIMEOUTS timeouts of its own before its circuit opened. Real PostgreSQL, NATS
// JetStream and a local HTTPS receiver that records when each request opened and closed.
import t from "tap";
import { until } from "../helpers/harness.ts";
import { spawnService } from "../helpers/processes.ts";
import { mostOpenAtOnce, type RecordedRequest } from "../helpers/receiver.ts";
import { startTcpProxy } from "../helpers/tcp-proxy.ts";
import { createIntents, hookHost, webhookSetup, workerEnv } from "../helpers/webhooks.ts";

type Test = Pick<typeof t, "teardown">;

const timeoutMs = 1500;
const cap = 2;

/** A setup with no worker of its own, an endpoint that never answers, and two worker processes (with `circuitTimeouts`). */
async function twoWorkersAndAHangingEndpoint(t: Test, circuitTimeouts: number) {
  const s = await webhookSetup(t, { roles: ["rpc", "gateway"], respond: () => ({ status: 200, hang: true }) });
  const proxies = [await startTcpProxy(t, s.receiver.port), await startTcpProxy(t, s.receiver.port)];
  const workers = proxies.map((p) =>
    spawnService(t, ["worker"], workerEnv(t, s, {
      WEBHOOK_CONNECT_TO: `${hookHost}:443:127.0.0.1:${p.port}`,
      WEBHOOK_TIMEOUT_MS: String(timeoutMs),
      WEBHOOK_ENDPOINT_CONCURRENCY: String(cap),
      WEBHOOK_CIRCUIT_TIMEOUTS: String(circuitTimeouts),
      // Retries soon, so that deliveries are always due: the cap, not the schedule, bounds what is in flight.
      WEBHOOK_RETRY_DELAYS: "0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5",
    })),
  );
  await Promise.all(workers.map((w) => w.started));
  await s.createEndpoint();
  // Enough deliveries that both workers pull some: each message pulled is a worker's to try.
  await createIntents(s, 40);
  return { s, proxies, workers };
}

const describe = (rs: readonly RecordedRequest[]) => rs.map((r) => `${r.at % 100_000}-${r.closedAt === undefined ? "open" : r.closedAt % 100_000}`).join(" ");

t.test(`two workers and a hanging endpoint: at most WEBHOOK_ENDPOINT_CONCURRENCY (${cap}) requests wait on it at once, across both`, async (t) => {
  const { s, proxies } = await twoWorkersAndAHangingEndpoint(t, 0);
  // Several rounds of timeouts, and both workers have sent.
  await until(
    "12 attempts, from both workers",
    async () => s.receiver.requests.filter((r) => r.closedAt !== undefined).length >= 12 && proxies.every((p) => p.bytesFromClients > 0),
    60_000,
    () => `${s.receiver.requests.length} request(s); bytes from each worker: ${proxies.map((p) => p.bytesFromClients).join(", ")}`,
  );
  const requests = s.receiver.requests.slice();
  const most = mostOpenAtOnce(requests);
  t.ok(most <= cap, `at most ${cap} requests open at once (${most}): ${describe(requests)}`);
  t.equal(most, cap, "the cap is used");
});

t.test("two workers: the circuit counts both workers' timeouts, and once open one request at a time waits on the endpoint", async (t) => {
  const circuitTimeouts = 2;
  const { s, proxies } = await twoWorkersAndAHangingEndpoint(t, circuitTimeouts);
  // The first requests time out (two of them open the circuit); then several probes, from both workers.
  await until(
    "10 attempts, from both workers",
    async () => s.receiver.requests.filter((r) => r.closedAt !== undefined).length >= 10 && proxies.every((p) => p.bytesFromClients > 0),
    60_000,
    () => `${s.receiver.requests.length} request(s); bytes from each worker: ${proxies.map((p) => p.bytesFromClients).join(", ")}`,
  );
  const requests = s.receiver.requests.slice().sort((a, b) => a.at - b.at);
  // By the time the first `cap` requests have timed out, their timeouts have opened it.
  const openedBy = Math.max(...requests.slice(0, cap).map((r) => r.closedAt ?? Infinity));
  const later = requests.filter((r) => r.at > openedBy + 500);
  t.ok(later.length >= 3, `probes after the circuit opened (${later.length})`);
  const most = mostOpenAtOnce(later);
  t.equal(most, 1, `one request at a time once the circuit is open: ${describe(later)}`);
});
