// SIGTERM while the database host has gone from the network (nothing answers, not even a close):
// the service exits on its own, cleanly, within its shutdown deadline, and its last lines name
// what it gave up on. A stop that waited for the database would hang until it was killed.
import t from "tap";
import { call, idemKey, sampleIntent, until } from "../helpers/harness.ts";
import { serviceSystem, spawnService } from "../helpers/processes.ts";
import { startTcpProxy } from "../helpers/tcp-proxy.ts";
import { hookHost } from "../helpers/webhooks.ts";

t.test("SIGTERM during a database outage: a clean exit within the deadline, naming what it gave up on", { timeout: 120_000 }, async (t) => {
  const s = await serviceSystem(t);
  await s.first.kill("SIGTERM");

  // The same system again, its database reached through a proxy the test can cut.
  const proxy = await startTcpProxy(t, Number(new URL(s.databaseUrl).port || 5432));
  const url = new URL(s.databaseUrl);
  url.port = String(proxy.port);
  const p = spawnService(t, ["rpc", "gateway", "worker", "scheduler"], { ...s.env, DATABASE_URL: url.toString(), LOG_LEVEL: "info" });
  await p.started;
  const intents = `/api/v1/merchants/${s.creds.merchant}/payment-intents`;
  const endpoint = await call(s.base, "POST", `/api/v1/merchants/${s.creds.merchant}/webhook-endpoints`, { key: s.creds.key, body: { url: `https://${hookHost}/hooks/1` } });
  t.equal(endpoint.status, 200);
  for (let i = 0; i < 5; i++) t.equal((await call(s.base, "POST", intents, { key: s.creds.key, idempotencyKey: idemKey(), body: sampleIntent })).status, 200);
  await until("the first webhooks delivered", async () => s.receiver.requests.length >= 5, 20_000);

  proxy.blackhole();
  // Requests in flight when the database went silent, and more after it.
  const inFlight = Array.from({ length: 6 }, () => call(s.base, "POST", intents, { key: s.creds.key, idempotencyKey: idemKey(), body: sampleIntent }).catch((e: Error) => e));
  await until("the requests are in flight", async () => proxy.connections > 0, 5_000).catch(() => undefined);
  const signalled = Date.now();
  p.child.kill("SIGTERM");
  const code = await p.exited;
  const took = Date.now() - signalled;
  t.equal(code, 0, `exit 0 (${took} ms): ${p.output().slice(-1500)}`);
  t.notMatch(p.output(), /shutdown took longer/, "not the fatal line of a shutdown that hung");
  const stopped = p
    .stdout()
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as { msg?: string; gave_up?: string[] })
    .find((l) => l.msg === "stopped");
  t.ok(stopped, "the stopped line is written");
  t.ok((stopped?.gave_up ?? []).length > 0, `it names what it gave up on: ${JSON.stringify(stopped?.gave_up)}`);
  const answers = await Promise.all(inFlight);
  t.same(
    answers.filter((r) => !(r instanceof Error) && r.status !== 503 && r.status !== 200).map((r) => (r as { status: number }).status),
    [],
    "the requests in flight got 200 or 503 unavailable (or the connection closed), never 500",
  );
});
