// At most one attempt of a delivery in flight, anywhere (issue 48): a worker stalls (SIGSTOP)
// while its request waits for the receiver's answer, past the message's ack deadline, so JetStream
// hands the message out again; the copy must not POST the webhook a second time. Real PostgreSQL,
// NATS JetStream, two worker child processes (`main.ts worker`) and a local HTTPS receiver.
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import t from "tap";
import { streamNames } from "../../services/delivery/jetstream.ts";
import { natsUrl, until } from "../helpers/harness.ts";
import { spawnService } from "../helpers/processes.ts";
import type { RecordedRequest } from "../helpers/receiver.ts";
import { startTcpProxy } from "../helpers/tcp-proxy.ts";
import { consumerDrained, createIntents, eventIdOf, hookHost, waitForDelivery, webhookSetup, workerEnv } from "../helpers/webhooks.ts";

/** How many requests of each event id reached the receiver. */
const postsByEvent = (requests: readonly RecordedRequest[]) => {
  const m = new Map<string, number>();
  for (const r of requests) m.set(eventIdOf(r), (m.get(eventIdOf(r)) ?? 0) + 1);
  return m;
};

t.test("a copy of a message whose attempt is in flight never POSTs: the receiver gets the webhook once", async (t) => {
  // The first request is answered only when the test says so: long after half the first backoff
  // (0.25 s), well within the attempt timeout (30 s).
  let answer!: () => void;
  const answered = new Promise<void>((resolve) => (answer = resolve));
  const s = await webhookSetup(t, {
    roles: ["rpc", "gateway"],
    respond: async (_req, n) => {
      if (n === 1) await answered;
      return { status: 200, body: "ok" };
    },
  });
  t.teardown(() => answer());
  // Both workers run before the event exists, so the attempt's time is not a worker's start-up's;
  // each reaches the receiver through its own TCP relay, whose bytes show which one sent it.
  const proxies = [await startTcpProxy(t, s.receiver.port), await startTcpProxy(t, s.receiver.port)];
  const workers = proxies.map((p) =>
    spawnService(t, ["worker"], workerEnv(t, s, {
      WEBHOOK_CONNECT_TO: `${hookHost}:443:127.0.0.1:${p.port}`,
      WEBHOOK_RETRY_DELAYS: "0.5,0.5,0.5,0.5,0.5",
      WEBHOOK_TIMEOUT_MS: "30000",
      LOG_LEVEL: "debug",
    })),
  );
  await Promise.all(workers.map((w) => w.started));

  await s.createEndpoint();
  await createIntents(s, 1);
  const [request] = await s.receiver.waitFor(1, 20_000);
  const eventId = eventIdOf(request!);
  const [row] = await s.app.db.em.fork().execute<{ id: string }[]>(`select id from webhook_deliveries where event_id = ?`, [eventId]);
  const sender = proxies.findIndex((p) => p.bytesFromClients > 0);
  t.ok(sender >= 0 && proxies.filter((p) => p.bytesFromClients > 0).length === 1, "one worker sent the request");
  const first = workers[sender]!;
  const second = workers[1 - sender]!;

  // The worker with the request in flight stalls: no working() goes out, and past the 0.5 s ack
  // deadline JetStream hands the message out again (to the other worker, or to the stalled one's
  // pull request, which it reads once it runs again).
  first.child.kill("SIGSTOP");
  t.teardown(() => void first.child.kill("SIGCONT"));
  const names = streamNames(s.prefix);
  const nc = await connect({ servers: natsUrl });
  t.teardown(() => nc.close());
  const jsm = await jetstreamManager(nc);
  await until("the message handed out again", async () => (await jsm.consumers.info(names.stream, names.consumer)).delivered.consumer_seq >= 2, 20_000);
  first.child.kill("SIGCONT");

  // The copy has been dealt with while the first attempt still waits for its answer: it was either
  // sent (a second request of the event) or set aside (the worker that got it says so).
  const setAside = /"delivery":"[^"]+"[^\n]*attempt is in flight/;
  const dealt = await until(
    "the copy dealt with",
    async () => (s.receiver.requests.length >= 2 ? "sent" : setAside.test(first.output() + second.output()) ? "set aside" : undefined),
    20_000,
    () => `${s.receiver.requests.length} request(s)`,
  );
  answer();

  const d = await waitForDelivery(s, row!.id, (x) => x.status === "delivered", 30_000);
  await consumerDrained(s);
  t.equal(dealt, "set aside", "the copy was set aside, not sent");
  t.equal(postsByEvent(s.receiver.requests).get(eventId), 1, "the receiver got the event once");
  t.equal(d.attempt_count, 1, "one attempt counted");
  t.match(d.attempts, [{ number: 1, outcome: "success", status_code: 200 }], "the attempt in flight recorded its answer");
  t.equal(d.attempts.length, 1, "and no other attempt");
  t.equal(second.child.exitCode, null, "the second worker still runs");
  t.equal(first.child.exitCode, null, "the first worker still runs");
});
