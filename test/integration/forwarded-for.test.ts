// TRUSTED_PROXIES is empty by default: only the connection's peer counts. X-Forwarded-For from
// anyone, loopback included (anything on the host that forwards traffic without rewriting the
// header), is ignored, so a client cannot pick the address its limits count against: the issue's
// 65 QR calls with a new X-Forwarded-For each, all answered 200.
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import t from "tap";
import { QrService } from "../../gen/payments/v1/qr_pb.ts";
import { SiteService } from "../../gen/payments/v1/shopper_pb.ts";
import { createQrConfiguration } from "../../services/qr/admin.ts";
import { createSiteCredential } from "../../services/site/credentials.ts";
import { call, freshMinute, merchantWithKey, startTestApp } from "../helpers/harness.ts";

// No TRUSTED_PROXIES: the default.
const s = await startTestApp(t, { PUBLIC_RATE_LIMIT_PER_MINUTE: "3", SITE_READ_RATE_LIMIT_PER_MINUTE: "3" }, ["rpc", "gateway"]);
const owner = await merchantWithKey(s.app);
const em = () => s.app.db.em.fork();
const sessions = new Http2SessionManager(s.rpcUrl);
t.teardown(() => sessions.abort());
const transport = createGrpcTransport({ baseUrl: s.rpcUrl, sessionManager: sessions });

t.test("X-Forwarded-For is ignored by default: rotating it does not get a client past the QR route's limit, on REST or gRPC", async (t) => {
  const qr = await createQrConfiguration(em(), { merchantId: owner.merchant, environment: "test", label: "Counter" });
  await freshMinute();
  const statuses: number[] = [];
  for (let i = 1; i <= 4; i++) {
    statuses.push((await call(s.base, "GET", `/api/v1/qr/${qr.qr_public_id}`, { headers: { "x-forwarded-for": `203.0.113.${i}` } })).status);
  }
  t.same(statuses, [200, 200, 200, 429], "four calls from one socket address, each naming another client: the 4th is over the limit of 3");
  const grpc = createClient(QrService, transport);
  const over = await grpc.getQrConfiguration({ qrPublicId: qr.qr_public_id }, { headers: { "x-forwarded-for": "198.51.100.77" } }).then(
    () => undefined,
    (e: unknown) => ConnectError.from(e),
  );
  t.equal(over?.code, Code.ResourceExhausted, "the rpc port ignores the header too: the same address, the same count");
});

t.test("X-Forwarded-For is ignored by default for Site Gateway reads too", async (t) => {
  const site = await createSiteCredential(em(), owner.merchant, "test", ["https://shop.example"]);
  await freshMinute();
  const statuses: number[] = [];
  for (let i = 1; i <= 4; i++) {
    statuses.push((await call(s.base, "GET", "/api/v1/site-payment-intents/pi_unknown", { key: site.credential, headers: { "x-forwarded-for": `192.0.2.${i}` } })).status);
  }
  t.same(statuses, [404, 404, 404, 429], "the 4th read from one socket address is over the limit, whatever address it names");
  const grpc = createClient(SiteService, transport);
  const over = await grpc.getSitePaymentIntent({ publicId: "pi_unknown" }, { headers: { authorization: `Bearer ${site.credential}`, "x-forwarded-for": "192.0.2.99" } }).then(
    () => undefined,
    (e: unknown) => ConnectError.from(e),
  );
  t.equal(over?.code, Code.ResourceExhausted);
});
