// WebhookService over RPC_PORT with the Connect client (gRPC protocol): the same rules
// as through the REST gateway, with the error code as a payments.v1.ErrorDetail.
import { createClient, ConnectError, Code } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import t from "tap";
import { ErrorDetailSchema } from "../../gen/payments/v1/options_pb.ts";
import { WebhookService } from "../../gen/payments/v1/webhooks_pb.ts";
import { idemKey } from "../helpers/harness.ts";
import { finished, hookHost, waitForDelivery, webhookSetup } from "../helpers/webhooks.ts";

const s = await webhookSetup(t);
const client = createClient(WebhookService, createGrpcTransport({ baseUrl: s.rpcUrl }));
const headers = { authorization: `Bearer ${s.creds.key}` };
const merchant = s.creds.merchant;

t.test("create, test, list deliveries, replay and disable over gRPC", async (t) => {
  const created = await client.createWebhookEndpoint({ merchant, url: `https://${hookHost}/grpc` }, { headers });
  t.match(created.data?.signingSecret, /^whsec_/);
  const id = created.data?.id ?? "";
  const got = await client.getWebhookEndpoint({ merchant, endpointId: id }, { headers });
  t.equal(got.data?.url, `https://${hookHost}/grpc`);
  const sent = await client.testWebhookEndpoint({ merchant, endpointId: id }, { headers });
  t.equal(sent.data?.eventType, "webhook.test");
  await waitForDelivery(s, sent.data?.id ?? "", finished);
  const list = await client.listWebhookDeliveries({ merchant, endpointId: id }, { headers });
  t.equal(list.data[0]?.status, "delivered");
  t.equal(list.data[0]?.attempts[0]?.statusCode, 200);
  const replay = await client.replayWebhookDelivery({ merchant, deliveryId: list.data[0]?.id ?? "" }, { headers: { ...headers, "idempotency-key": idemKey() } });
  t.equal(replay.data?.replayOf, list.data[0]?.id);
  const disabled = await client.disableWebhookEndpoint({ merchant, endpointId: id }, { headers });
  t.equal(disabled.data?.status, "disabled");
});

t.test("errors carry the documented code and param", async (t) => {
  const refused = await client.createWebhookEndpoint({ merchant, url: "https://10.1.2.3/hook" }, { headers }).catch((e) => e);
  t.ok(refused instanceof ConnectError);
  t.equal((refused as ConnectError).code, Code.InvalidArgument);
  const detail = (refused as ConnectError).findDetails(ErrorDetailSchema)[0];
  t.same([detail?.code, detail?.param], ["validation_failed", "url"]);
  const noKey = await client.replayWebhookDelivery({ merchant, deliveryId: "wd_x" }, { headers }).catch((e) => e);
  t.equal((noKey as ConnectError).findDetails(ErrorDetailSchema)[0]?.code, "idempotency_key_required");
});
