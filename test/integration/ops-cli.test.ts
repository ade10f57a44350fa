// The ops CLI against a running app: a delivery that fails terminally (HTTP 410) shows up in
// `deliveries --status failed`, and `consumers` shows the test's shortened retry schedule.
import t from "tap";
import { runCli } from "../helpers/processes.ts";
import { call, natsUrl, uniqueName } from "../helpers/harness.ts";
import { waitForDelivery, webhookSetup } from "../helpers/webhooks.ts";

const ops = (env: Record<string, string>, ...args: string[]) => runCli("services/app/ops-cli.ts", env, ...args);

t.test("ops consumers and deliveries", async (t) => {
  const s = await webhookSetup(t, { respond: () => ({ status: 410 }) });
  const endpoint = await s.createEndpoint();
  const sent = await call(s.base, "POST", `/api/v1/merchants/${s.creds.merchant}/webhook-endpoints/${endpoint.id}/test`, { key: s.creds.key });
  t.equal(sent.status, 200, JSON.stringify(sent.body));
  const deliveryId: string = sent.body.data.id;
  await waitForDelivery(s, deliveryId, (d) => d.status === "failed");

  const env = { DATABASE_URL: s.databaseUrl, NATS_URL: natsUrl, JETSTREAM_PREFIX: s.prefix };
  const prefix = s.prefix;

  t.test("consumers --json", async (t) => {
    const r = await ops(env, "consumers", "--json");
    t.equal(r.code, 0, r.stderr);
    const view = JSON.parse(r.stdout);
    t.equal(view.stream.name, `${prefix}-webhook-deliveries`);
    t.ok(view.stream.subjects.length > 0 && view.stream.subjects.every((x: string) => x.startsWith(`${prefix}.`)), "subjects carry the prefix");
    t.equal(view.stream.retention, "workqueue");
    t.equal(view.consumer.name, `${prefix}-webhook-worker`);
    t.equal(view.consumer.max_deliver, 6);
    t.same(view.consumer.backoff_seconds, [0.2, 0.2, 0.2, 0.2, 0.2]);
    for (const k of ["num_pending", "num_ack_pending", "num_redelivered", "num_waiting", "max_ack_pending"]) {
      t.type(view.consumer[k], "number", k);
      t.type(view.backlog_consumer[k], "number", `the backlog lane's ${k}`);
    }
    t.equal(view.consumer.subject, `${prefix}.webhooks.delivery`, "the main lane's subject");
    t.equal(view.backlog_consumer.name, `${prefix}-webhook-worker-backlog`);
    t.equal(view.backlog_consumer.subject, `${prefix}.webhooks.delivery.backlog`, "the backlog lane's subject");
    t.same(view.backlog_consumer.backoff_seconds, view.consumer.backoff_seconds, "one schedule for both lanes");
  });

  t.test("consumers table", async (t) => {
    const r = await ops(env, "consumers");
    t.equal(r.code, 0, r.stderr);
    t.match(r.stdout, `${prefix}-webhook-worker`);
    t.match(r.stdout, `${prefix}-webhook-worker-backlog`);
    t.match(r.stdout, "0.2s, 0.2s, 0.2s, 0.2s, 0.2s");
    t.match(r.stdout, /num_waiting\s+\d+/);
  });

  t.test("deliveries --status failed --json", async (t) => {
    const r = await ops(env, "deliveries", "--status", "failed", "--json");
    t.equal(r.code, 0, r.stderr);
    const rows = JSON.parse(r.stdout);
    const row = rows.find((d: { id: string }) => d.id === deliveryId);
    t.ok(row, "the failed delivery is listed");
    t.match(row, {
      merchant_id: s.creds.merchant,
      environment: "test",
      endpoint_id: endpoint.id,
      event_type: "webhook.test",
      status: "failed",
      cause: "event",
      attempt_count: 1,
      last_status_code: 410,
      last_error: "HTTP 410",
    });
    t.notOk("secret_ciphertext" in row, "no endpoint secret");
    t.notMatch(r.stdout, endpoint.secret, "the signing secret is never printed");
    t.ok(rows.every((d: { status: string }) => d.status === "failed"), "only failed deliveries");
  });

  t.test("deliveries table", async (t) => {
    const r = await ops(env, "deliveries", "--status", "failed", "--merchant", s.creds.merchant);
    t.equal(r.code, 0, r.stderr);
    t.match(r.stdout, deliveryId);
    t.match(r.stdout, "HTTP 410");
    t.match(r.stdout.split("\n")[0], /\bcause\b/, "why each was made is a column");
    const none = await ops(env, "deliveries", "--status", "delivered");
    t.equal(none.code, 0, none.stderr);
    t.match(none.stdout, /^no delivered deliveries/);
  });

  t.test("bad input: one line, exit 2", async (t) => {
    for (const args of [["deliveries", "--status", "bogus"], ["deliveries", "--limit", "1001"], ["consumers", "--status", "failed"], ["nonsense"]]) {
      const r = await ops(env, ...args);
      t.equal(r.code, 2, args.join(" "));
      t.equal(r.stdout, "", "nothing on stdout");
      if (args[0] !== "nonsense") t.match(r.stderr, /^ops: [^\n]+\n$/, "one line on stderr");
    }
  });

  t.test("a prefix without a stream", async (t) => {
    const other = uniqueName("none");
    const r = await ops({ ...env, JETSTREAM_PREFIX: other }, "consumers");
    t.equal(r.code, 1);
    t.equal(r.stderr, `ops: no stream ${other}-webhook-deliveries yet: start a worker (npm start) to create it\n`);
  });

  t.test("NATS not reachable", async (t) => {
    const r = await ops({ ...env, NATS_URL: "nats://127.0.0.1:1" }, "consumers");
    t.equal(r.code, 1);
    t.match(r.stderr, /^ops: NATS is not reachable at nats:\/\/127\.0\.0\.1:1\b[^\n]*\n$/);
  });
});
