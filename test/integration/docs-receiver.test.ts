// The example receiver, examples/receiver.mjs (the file itself, which docs/webhooks.md shows), run
// as the README's walk-through runs it (from the directory holding hook.key and hook.crt): it prints
// what it receives, and a replay of an event it has seen is printed as a skipped duplicate rather
// than nothing at all.
import t from "tap";
import { exampleReceiver } from "../helpers/example-receiver.ts";
import { call, idemKey, merchantWithKey, startTestApp, until } from "../helpers/harness.ts";

const hookName = "hooks.local.test";

t.test("the example receiver prints each event once, and a replay as a skipped duplicate", async (t) => {
  const receiver = await exampleReceiver(t, hookName);
  const { app, base } = await startTestApp(t, { WEBHOOK_CONNECT_TO: `${hookName}:443:127.0.0.1:${receiver.port}` });
  const a = await merchantWithKey(app);
  const merchantPath = `/api/v1/merchants/${a.merchant}`;
  const endpoint = await call(base, "POST", `${merchantPath}/webhook-endpoints`, { key: a.key, body: { url: `https://${hookName}/webhooks` } });
  t.equal(endpoint.status, 200, "the endpoint is created");
  await receiver.start(endpoint.body.data.signing_secret);
  const printed = receiver.printed;

  const sent = await call(base, "POST", `${merchantPath}/webhook-endpoints/${endpoint.body.data.id}/test`, { key: a.key });
  t.equal(sent.status, 200);
  const event = sent.body.data.event_id as string;
  await until("the receiver to print the test event", async () => printed().includes(`webhook.test ${event}\n`), 20_000, () => printed());
  t.pass(`it printed "webhook.test ${event}"`);
  await until("the delivery to be recorded delivered", async () => {
    const res = await call(base, "GET", `${merchantPath}/webhook-deliveries?endpoint_id=${endpoint.body.data.id}&status=delivered`, { key: a.key });
    return res.body.data?.length === 1;
  }, 20_000);

  const replay = await call(base, "POST", `${merchantPath}/webhook-deliveries/${sent.body.data.id}/replay`, { key: a.key, idempotencyKey: idemKey() });
  t.equal(replay.status, 200, `replayed (${replay.body.error?.message ?? "a new delivery"})`);
  await until("the receiver to print the replay", async () => printed().includes(`duplicate ${event} (a retry or a replay), skipped\n`), 20_000, () => printed());
  t.pass("the replay is visible: a skipped duplicate");
  await until("the replay to be recorded delivered (the receiver answered 2xx)", async () => {
    const res = await call(base, "GET", `${merchantPath}/webhook-deliveries?endpoint_id=${endpoint.body.data.id}&status=delivered`, { key: a.key });
    return res.body.data?.length === 2;
  }, 20_000);
  t.equal(printed().split("\n").filter((l) => l.includes(event)).length, 2, "one line per delivery, nothing else");
});
