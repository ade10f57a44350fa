// docs/webhooks.md's rotation note, as written: after `rotate-secret --overlap 0` a receiver still
// holding the old secret (examples/receiver.mjs) answers 400, which ends the delivery at once
// (`failed`, one attempt: a 4xx is terminal), and such deliveries come back only when sent again,
// by the replay route or by `ops recover`, once the receiver has the new secret.
import t from "tap";
import { createInternalCredential } from "../../services/auth/admin.ts";
import { reachable } from "../../services/platform/reachable.ts";
import { exampleReceiver } from "../helpers/example-receiver.ts";
import { call, idemKey, merchantWithKey, startTestApp, until } from "../helpers/harness.ts";
import { runCli } from "../helpers/processes.ts";

const hookName = "hooks.rotation-doc.test";

t.test("refused after a rotation: terminal at once, then recovered by replay and by ops recover", async (t) => {
  const receiver = await exampleReceiver(t, hookName);
  const port = receiver.port;
  // Quick retries: were a refused delivery retried, its second attempt would come well within the waits below.
  const s = await startTestApp(t, { WEBHOOK_CONNECT_TO: `${hookName}:443:127.0.0.1:${port}`, WEBHOOK_RETRY_DELAYS: "0.2,0.2" });
  const a = await merchantWithKey(s.app);
  const m = `/api/v1/merchants/${a.merchant}`;
  const endpoint = await call(s.base, "POST", `${m}/webhook-endpoints`, { key: a.key, body: { url: `https://${hookName}/webhooks` } });
  const endpointId: string = endpoint.body.data.id;
  const oldSecret: string = endpoint.body.data.signing_secret;

  const printed = receiver.printed;
  const holdingOld = await receiver.start(oldSecret);

  const { credential } = await createInternalCredential(s.app.db.em.fork(), "docs-rotation test", ["admin"], "test");
  const cli = { RPC_URL: s.rpcUrl, INTERNAL_CREDENTIAL: credential };
  const rotated = await runCli("services/app/admin.ts", cli, "endpoint", "rotate-secret", "--id", endpointId, "--overlap", "0");
  t.equal(rotated.code, 0, `rotated (${rotated.stderr})`);
  const newSecret: string = JSON.parse(rotated.stdout).signing_secret;
  const since = new Date(Date.now() - 1000).toISOString();

  const deliveryOf = async (eventId: string) =>
    (await call(s.base, "GET", `${m}/webhook-deliveries?event_id=${eventId}`, { key: a.key })).body.data as { id: string; status: string; attempt_count: number; last_status_code: number; replay_of: string | null }[];
  const refused: { event: string; delivery: string }[] = [];
  for (const n of [1, 2]) {
    const sent = await call(s.base, "POST", `${m}/webhook-endpoints/${endpointId}/test`, { key: a.key });
    t.equal(sent.status, 200, `test event ${n} sent`);
    const [d] = await until(`delivery ${n} to end`, async () => {
      const list = await deliveryOf(sent.body.data.event_id);
      return list[0]?.status === "failed" || list[0]?.status === "delivered" ? list : undefined;
    }, 20_000);
    t.equal(d!.status, "failed", `delivery ${n}: failed`);
    t.equal(d!.last_status_code, 400, `delivery ${n}: the receiver answered 400 (bad signature)`);
    t.equal(d!.attempt_count, 1, `delivery ${n}: after one attempt, not retried`);
    refused.push({ event: sent.body.data.event_id as string, delivery: d!.id });
  }
  t.notMatch(printed(), /webhook\.test evt_/, "the receiver handled none of them");

  holdingOld.kill("SIGTERM");
  await until("the old receiver to stop", async () => !(await reachable("127.0.0.1", port)), 15_000);
  await receiver.start(newSecret);

  const replay = await call(s.base, "POST", `${m}/webhook-deliveries/${refused[0]!.delivery}/replay`, { key: a.key, idempotencyKey: idemKey() });
  t.equal(replay.status, 200, "the first replayed through the API");
  await until("the replay printed", async () => printed().includes(`webhook.test ${refused[0]!.event}\n`), 20_000, () => printed());

  const recovered = await runCli("services/app/ops-cli.ts", cli, "recover", "--endpoint", endpointId, "--since", since);
  t.equal(recovered.code, 0, `ops recover ran (${recovered.stderr})`);
  t.equal(JSON.parse(recovered.stdout).recovered, 1, "ops recover sends the one not replayed yet");
  await until("the recovered one printed", async () => printed().includes(`webhook.test ${refused[1]!.event}\n`), 20_000, () => printed());
  for (const [i, r] of refused.entries()) {
    const list = await until(`event ${i + 1}'s new delivery recorded delivered`, async () => {
      const l = await deliveryOf(r.event);
      return l.some((d) => d.replay_of === r.delivery && d.status === "delivered") ? l : undefined;
    }, 20_000);
    t.equal(list.length, 2, `event ${i + 1}: the refused delivery and the one that reached the receiver`);
  }
});
