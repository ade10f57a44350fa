// One clock for ownership (issue 61): a delivery's takeover and its abandonment are decided on
// PostgreSQL's clock, never by comparing two workers' clocks; and an attempt that got a 2xx is
// recorded as delivered even when the sweep, during its worker's database outage, ended it as
// abandoned first. Real PostgreSQL, NATS JetStream, worker child processes (`main.ts worker`, one
// of them with its clock 10 s ahead) and a local HTTPS receiver.
import { setTimeout as sleep } from "node:timers/promises";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import t from "tap";
import { failAbandoned } from "../../services/delivery/webhook-deliveries.ts";
import { streamNames } from "../../services/delivery/jetstream.ts";
import { freePort } from "../../services/platform/listen.ts";
import { autoDisableFailing, recoverFailedDeliveries } from "../../services/webhooks/operations.ts";
import { natsUrl, until } from "../helpers/harness.ts";
import { spawnService, type ServiceProcess } from "../helpers/processes.ts";
import { mostOpenAtOnce } from "../helpers/receiver.ts";
import { skewedClock } from "../helpers/skewed-clock.ts";
import { startTcpProxy, type TcpProxy } from "../helpers/tcp-proxy.ts";
import { consumerDrained, createIntents, eventIdOf, hookHost, waitForDelivery, webhookSetup, workerEnv, type WebhookSetup } from "../helpers/webhooks.ts";

/** Waits until the durable consumer has `n` waiting pull requests (`exactly`), or at least `n`. */
async function waitForPullers(s: WebhookSetup, n: number, workers: readonly ServiceProcess[], exactly = false): Promise<void> {
  const names = streamNames(s.prefix);
  const nc = await connect({ servers: natsUrl });
  try {
    const jsm = await jetstreamManager(nc);
    let last = "";
    await until(
      `${exactly ? "" : "at least "}${n} pull request(s) waiting on ${names.consumer}`,
      async () => {
        const info = await jsm.consumers.info(names.stream, names.consumer).catch(() => undefined);
        if (info) last = `num_waiting ${info.num_waiting}`;
        return info !== undefined && (exactly ? info.num_waiting === n : info.num_waiting >= n);
      },
      20_000,
      () => `${last}; ${workers.map((w) => w.output().slice(-500)).join(" || ")}`,
    );
  } finally {
    await nc.close();
  }
}

/** The `time` of the process's last JSON log line (pino: its Date.now()). */
function lastLogTime(p: ServiceProcess): number | undefined {
  const lines = p.stdout().split("\n").filter((l) => l.startsWith("{"));
  const last = lines.at(-1);
  return last === undefined ? undefined : (JSON.parse(last) as { time?: number }).time;
}

t.test("a worker whose clock is 10 s ahead does not take over an attempt in flight", async (t) => {
  // The attempt timeout is 12 s, so a copy may take the delivery over 5 + 12 + 2 = 19 s after the
  // claim. A worker 10 s ahead that measured that on its own clock against the claim's time written
  // with another's took over 9 s after the claim, while the first request was still open (it is
  // never answered here: it ends at its worker's timeout, 12 s after it went out).
  const s = await webhookSetup(t, {
    roles: ["rpc", "gateway"],
    respond: (_req, n) => (n === 1 ? { status: 200, hang: true } : { status: 200, body: "ok" }),
  });
  const proxies = [await startTcpProxy(t, s.receiver.port), await startTcpProxy(t, s.receiver.port)];
  const env = (proxy: TcpProxy, extra: Record<string, string>) =>
    workerEnv(t, s, {
      WEBHOOK_CONNECT_TO: `${hookHost}:443:127.0.0.1:${proxy.port}`,
      WEBHOOK_RETRY_DELAYS: "0.5,0.5,0.5,0.5,0.5",
      WEBHOOK_TIMEOUT_MS: "12000",
      LOG_LEVEL: "debug",
      ...extra,
    });
  // Both workers run before the event exists (a start takes seconds, more on a loaded machine, and
  // the copy must reach the second well within the takeover time). The first, on the machine's
  // clock, runs one attempt at a time: while it runs, it makes no pull request. The second one's
  // process reads its clock 10 s ahead; nothing else does.
  const first = spawnService(t, ["worker"], env(proxies[0]!, { WEBHOOK_CONCURRENCY: "1" }));
  const second = spawnService(t, ["worker"], { ...env(proxies[1]!, {}), ...skewedClock(10_000) });
  await Promise.all([first.started, second.started]);
  const skew = (lastLogTime(second) ?? 0) - Date.now();
  t.ok(skew > 9_000 && skew < 11_000, `the second worker's clock reads 10 s ahead (${skew} ms)`);
  await waitForPullers(s, 2, [first, second]);
  // The second one stops until the first holds the message: its pull requests lapse (after 5 s),
  // so the first attempt can only be the first worker's.
  second.child.kill("SIGSTOP");
  t.teardown(() => void second.child.kill("SIGCONT"));
  await sleep(5_500);

  await s.createEndpoint();
  await createIntents(s, 1);
  const [request] = await s.receiver.waitFor(1, 20_000);
  const eventId = eventIdOf(request!);
  t.ok(proxies[0]!.bytesFromClients > 0 && proxies[1]!.bytesFromClients === 0, "the first worker sent the first request");
  const [row] = await s.app.db.em.fork().execute<{ id: string; last_attempt_at: Date | string }[]>(
    `select id, last_attempt_at from webhook_deliveries where event_id = ?`,
    [eventId],
  );
  const claimedAt = new Date(row!.last_attempt_at).getTime();
  // A pull request the first worker made before its attempt started (its message may have waited
  // a moment for its new endpoint's slot) lapses within 5 s; then the second one pulls again.
  await waitForPullers(s, 0, [first], true);
  second.child.kill("SIGCONT");
  await waitForPullers(s, 1, [first, second]);

  // The first worker stalls past its message's 0.5 s ack deadline: JetStream hands the message
  // out again, to the second worker, while the first request is still open. The stall lasts until
  // 11 s after the claim: past the 9 s at which the second worker's own clock said the attempt
  // could be taken over, short of the first request's timeout (12 s) and of the takeover (19 s).
  // Running, the first worker's working() would keep the copy from coming back to the second.
  first.child.kill("SIGSTOP");
  t.teardown(() => void first.child.kill("SIGCONT"));
  const names = streamNames(s.prefix);
  const nc = await connect({ servers: natsUrl });
  t.teardown(() => nc.close());
  const jsm = await jetstreamManager(nc);
  await until("the message handed out again", async () => (await jsm.consumers.info(names.stream, names.consumer)).delivered.consumer_seq >= 2, 20_000);
  const setAside = /"delivery":"[^"]+"[^\n]*attempt is in flight/;
  await until("the second worker set its copy aside", async () => setAside.test(second.output()), 20_000, () => `first: ${first.output().slice(-1500)} || second: ${second.output().slice(-1500)}`);
  await sleep(Math.max(0, claimedAt + 11_000 - Date.now()));
  first.child.kill("SIGCONT");

  // The sentinel: the first attempt ends at its timeout, and its retry is answered. Whatever the
  // copy did, it did before the delivery is delivered and the consumer holds nothing more.
  const d = await waitForDelivery(s, row!.id, (x) => x.status === "delivered", 40_000);
  await consumerDrained(s);
  const posts = s.receiver.requests.filter((r) => eventIdOf(r) === eventId);
  t.equal(mostOpenAtOnce(posts), 1, "never two requests of the webhook open at once");
  t.match(
    d.attempts,
    [
      { number: 1, outcome: "retryable", error: "timeout" },
      { number: 2, outcome: "success", status_code: 200 },
    ],
    "the first attempt ran to its own timeout (not taken over, not lost); its retry was answered",
  );
  t.equal(d.attempts.length, 2, "and no other attempt");
  t.equal(posts.length, 2, "two requests: the one that timed out, and its retry");
  t.ok(posts[1]!.at >= posts[0]!.closedAt!, "the retry went out after the first request ended");
});

t.test("a 2xx whose record lands after the sweep ended its attempt as abandoned is delivered, and no failure", async (t) => {
  let proxy!: TcpProxy;
  const nowhere = await freePort();
  // The last attempt's request is answered 2xx; as it is, the worker loses the database (its
  // connections cut, new ones refused), so the outcome waits in the worker.
  const s = await webhookSetup(t, {
    roles: ["rpc", "gateway"],
    respond: (_req, n) => {
      if (n === 1) return { status: 503, body: "down" };
      proxy.retarget(nowhere);
      return { status: 200, body: "ok" };
    },
  });
  const databasePort = Number(new URL(s.databaseUrl).port || 5432);
  proxy = await startTcpProxy(t, databasePort);
  const url = new URL(s.databaseUrl);
  url.port = String(proxy.port);
  const worker = spawnService(
    t,
    ["worker"],
    workerEnv(t, s, { DATABASE_URL: url.toString(), WEBHOOK_RETRY_DELAYS: "0.5", WEBHOOK_MAX_ATTEMPTS: "2", WEBHOOK_TIMEOUT_MS: "2000" }),
  );
  await worker.started;
  const ep = await s.createEndpoint();
  const since = new Date();
  await createIntents(s, 1);
  await s.receiver.waitFor(2, 20_000);
  await until("the worker holds the answer and cannot record it", async () => /database \(delivery worker\) unavailable; retrying/.test(worker.output()), 20_000, () => worker.output().slice(-1500));
  const em = () => s.app.db.em.fork();
  const [before] = await em().execute<{ id: string; status: string; attempt_count: number }[]>(`select id, status, attempt_count from webhook_deliveries`);
  t.match(before, { status: "processing", attempt_count: 2 }, "the last attempt is unrecorded");

  // Meanwhile another worker's sweep ends the attempt as abandoned, as it does once the outage has
  // outlasted the attempt's timeout and a minute (here at once), and removes its message.
  const seqs = await failAbandoned(em(), 2, 0);
  t.equal(seqs.length, 1, "the sweep ended it");
  const names = streamNames(s.prefix);
  const nc = await connect({ servers: natsUrl });
  t.teardown(() => nc.close());
  await (await jetstreamManager(nc)).streams.deleteMessage(names.stream, seqs[0]!, false);
  const [swept] = await em().execute<{ status: string; last_error: string }[]>(`select status, last_error from webhook_deliveries where id = ?`, [before!.id]);
  t.match(swept, { status: "failed", last_error: "worker_lost" }, "as worker_lost");

  // The database is back for the worker: its finish lands, after the sweep.
  proxy.retarget(databasePort);
  const d = await waitForDelivery(s, before!.id, (x) => x.status === "delivered", 30_000);
  t.match(d, { status: "delivered", attempt_count: 2, last_status_code: 200, last_error: null }, "delivered");
  t.match(
    d.attempts,
    [
      { number: 1, outcome: "retryable", status_code: 503 },
      { number: 2, outcome: "success", status_code: 200, error: null },
    ],
    "the last attempt is recorded as it was answered",
  );
  t.equal(d.attempts.length, 2, "once: the sweep's lost attempt is gone, not beside it");

  // Not a failure: auto-disable with no grace at all does not count it, and a recovery of the
  // endpoint's failed deliveries finds nothing to send again.
  t.same(await autoDisableFailing(em(), 0, 86_400), [], "auto-disable does not count it");
  t.same(await em().transactional((tx) => recoverFailedDeliveries(tx, ep.id, since, "test")), [], "no failed delivery to replay");
  const [endpoint] = await em().execute<{ status: string }[]>(`select status from webhook_endpoints where id = ?`, [ep.id]);
  t.equal(endpoint?.status, "enabled", "the endpoint stays enabled");
  t.equal(s.receiver.requests.length, 2, "the receiver got the attempt and its retry, nothing more");
});
