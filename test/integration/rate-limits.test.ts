// Limits belong to the route's proto option and hold on every transport: the public QR route per
// client address over REST and over gRPC on the rpc port alike (keyed through trusted proxies,
// so one client behind a proxy does not lock out the rest), and the Site Gateway's creates per
// credential. A copied site credential is refused from any page but the shop's own.
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import t from "tap";
import { ErrorDetailSchema } from "../../gen/payments/v1/options_pb.ts";
import { QrService } from "../../gen/payments/v1/qr_pb.ts";
import { SiteService } from "../../gen/payments/v1/shopper_pb.ts";
import { createQrConfiguration } from "../../services/qr/admin.ts";
import { createSiteCredential } from "../../services/site/credentials.ts";
import { call, freshMinute, idemKey, merchantWithKey, sampleIntent, startTestApp } from "../helpers/harness.ts";

// The tests call from loopback as a proxy would, naming each client in X-Forwarded-For: loopback is
// listed as a trusted proxy (none is by default; forwarded-for.test.ts shows the header ignored then).
const s = await startTestApp(
  t,
  { PUBLIC_RATE_LIMIT_PER_MINUTE: "3", SITE_RATE_LIMIT_PER_MINUTE: "3", SITE_READ_RATE_LIMIT_PER_MINUTE: "3", TRUSTED_PROXIES: "127.0.0.1,::1" },
  ["rpc", "gateway"],
);
const owner = await merchantWithKey(s.app);
const em = () => s.app.db.em.fork();
const sessions = new Http2SessionManager(s.rpcUrl);
t.teardown(() => sessions.abort());
const transport = createGrpcTransport({ baseUrl: s.rpcUrl, sessionManager: sessions });

async function grpcError(p: Promise<unknown>): Promise<ConnectError | undefined> {
  return p.then(
    () => undefined,
    (e: unknown) => ConnectError.from(e),
  );
}

t.test("the public QR route is limited on the rpc port too, per client address", async (t) => {
  const qr = await createQrConfiguration(em(), { merchantId: owner.merchant, environment: "test", label: "Counter" });
  const client = createClient(QrService, transport);
  await freshMinute();
  // Each caller names itself through X-Forwarded-For; the peer (loopback) is a trusted proxy here.
  const as = (address: string) => ({ headers: { "x-forwarded-for": address } });
  for (let i = 1; i <= 3; i++) t.equal((await client.getQrConfiguration({ qrPublicId: qr.qr_public_id }, as("203.0.113.7"))).data?.label, "Counter", `gRPC call ${i}`);
  const over = await grpcError(client.getQrConfiguration({ qrPublicId: qr.qr_public_id }, as("203.0.113.7")));
  t.equal(over?.code, Code.ResourceExhausted, "the 4th gRPC call in the minute");
  t.same(over?.findDetails(ErrorDetailSchema).map((d) => d.code), ["rate_limited"]);
  t.match(over?.metadata.get("retry-after") ?? "", /^[1-9][0-9]*$/, "with a retry-after in whole seconds");

  const other = await client.getQrConfiguration({ qrPublicId: qr.qr_public_id }, as("198.51.100.9"));
  t.equal(other.data?.label, "Counter", "another client behind the same proxy is not locked out");

  const rest = await call(s.base, "GET", `/api/v1/qr/${qr.qr_public_id}`, { headers: { "x-forwarded-for": "203.0.113.7" } });
  t.equal(rest.status, 429, "REST counts against the same client");
  t.match(rest.headers.get("retry-after") ?? "", /^[1-9][0-9]*$/);
  t.equal(rest.body.error.code, "rate_limited");
});

t.test("Site Gateway creates are limited per credential, on REST and gRPC", async (t) => {
  const shop = "https://shop.example";
  const site = await createSiteCredential(em(), owner.merchant, "test", [shop]);
  const other = await createSiteCredential(em(), owner.merchant, "test", [shop]);
  const create = (credential: string, headers: Record<string, string> = {}) =>
    call(s.base, "POST", "/api/v1/site-payment-intents", { key: credential, idempotencyKey: idemKey(), body: sampleIntent, headers });
  await freshMinute();
  for (let i = 1; i <= 2; i++) t.equal((await create(site.credential, { "x-forwarded-for": `192.0.2.${i}` })).status, 200, `REST create ${i}`);
  const grpc = createClient(SiteService, transport);
  await grpc.createSitePaymentIntent({ ...sampleIntent, requestedAmount: sampleIntent.requested_amount }, { headers: { authorization: `Bearer ${site.credential}`, "idempotency-key": idemKey() } });
  const over = await create(site.credential, { "x-forwarded-for": "192.0.2.99" });
  t.equal(over.status, 429, "the 4th create with the credential, whatever address it comes from");
  t.equal(over.body.error.code, "rate_limited");
  t.match(over.headers.get("retry-after") ?? "", /^[1-9][0-9]*$/);
  const overGrpc = await grpcError(grpc.createSitePaymentIntent({ ...sampleIntent, requestedAmount: sampleIntent.requested_amount }, { headers: { authorization: `Bearer ${site.credential}`, "idempotency-key": idemKey() } }));
  t.equal(overGrpc?.code, Code.ResourceExhausted, "and over gRPC");
  t.equal((await create(other.credential)).status, 200, "another credential of the same merchant is not limited by it");
  const rows = await em().execute<{ n: number }[]>(`select count(*)::int as n from payment_intents where merchant_id = ?`, [owner.merchant]);
  t.equal(rows[0]?.n, 4, "the refused creates created nothing");
});

t.test("a site credential is refused from a page whose origin is not on its list; a server may use it", async (t) => {
  const shop = "https://shop.example";
  const site = await createSiteCredential(em(), owner.merchant, "test", [shop]);
  // Each read from an address of its own: this test is about origins, not the per-address read limit.
  let n = 0;
  const read = (origin?: string) =>
    call(s.base, "GET", `/api/v1/site-payment-intents/pi_unknown`, { key: site.credential, headers: { "x-forwarded-for": `198.51.100.${++n}`, ...(origin ? { origin } : {}) } });
  for (const origin of ["https://evil.example", "null", "https://shop.example.evil.example", "http://shop.example"]) {
    const res = await read(origin);
    t.equal(res.status, 403, `Origin ${origin}: 403`);
    t.equal(res.body.error.code, "insufficient_scope");
    t.equal(res.headers.get("access-control-allow-origin"), null, "and nothing a page there could read");
  }
  t.equal((await read(shop)).status, 404, "the shop's own origin reaches the route");
  t.equal((await read()).status, 404, "a request without an Origin (a server's) reaches it too");
  const grpc = createClient(SiteService, transport);
  const err = await grpcError(grpc.getSitePaymentIntent({ publicId: "pi_unknown" }, { headers: { authorization: `Bearer ${site.credential}`, origin: "https://evil.example" } }));
  t.equal(err?.code, Code.PermissionDenied, "the same rule over gRPC");
});

t.test("Site Gateway reads are limited per credential and client address, on REST and gRPC", async (t) => {
  const shop = "https://shop.example";
  const site = await createSiteCredential(em(), owner.merchant, "test", [shop]);
  const other = await createSiteCredential(em(), owner.merchant, "test", [shop]);
  const read = (credential: string, address: string) => call(s.base, "GET", "/api/v1/site-payment-intents/pi_unknown", { key: credential, headers: { "x-forwarded-for": address } });
  await freshMinute();
  for (let i = 1; i <= 3; i++) t.equal((await read(site.credential, "203.0.113.20")).status, 404, `read ${i} reaches the route`);
  const over = await read(site.credential, "203.0.113.20");
  t.equal(over.status, 429, "the 4th read in the minute from that address");
  t.equal(over.body.error.code, "rate_limited");
  t.match(over.headers.get("retry-after") ?? "", /^[1-9][0-9]*$/);
  const grpc = createClient(SiteService, transport);
  const overGrpc = await grpcError(grpc.getSitePaymentIntent({ publicId: "pi_unknown" }, { headers: { authorization: `Bearer ${site.credential}`, "x-forwarded-for": "203.0.113.20" } }));
  t.equal(overGrpc?.code, Code.ResourceExhausted, "and over gRPC");
  t.same(overGrpc?.findDetails(ErrorDetailSchema).map((d) => d.code), ["rate_limited"]);
  t.equal((await read(site.credential, "203.0.113.21")).status, 404, "another shopper's address reads with the same credential");
  t.equal((await read(other.credential, "203.0.113.20")).status, 404, "the same address reads with another credential");
});

t.test("CheckSiteOrigin (the CORS preflight's question) is limited per client address", async (t) => {
  const shop = "https://cors-shop.example";
  await createSiteCredential(em(), owner.merchant, "test", [shop]);
  const preflight = (address: string) =>
    fetch(`${s.base}/api/v1/site-payment-intents`, { method: "OPTIONS", headers: { origin: shop, "access-control-request-method": "POST", "x-forwarded-for": address } });
  await freshMinute();
  for (let i = 1; i <= 3; i++) {
    const res = await preflight("203.0.113.30");
    t.equal(res.status, 204, `preflight ${i}`);
    t.equal(res.headers.get("access-control-allow-origin"), shop);
  }
  const over = await preflight("203.0.113.30");
  t.equal(over.status, 429, "the 4th preflight in the minute from that address");
  t.equal(((await over.json()) as { error: { code: string } }).error.code, "rate_limited");
  t.match(over.headers.get("retry-after") ?? "", /^[1-9][0-9]*$/);
  t.equal((await preflight("203.0.113.31")).status, 204, "another address is not limited by it");
  const grpc = createClient(SiteService, transport);
  const as = { headers: { "x-forwarded-for": "203.0.113.32" } };
  for (let i = 1; i <= 3; i++) t.equal((await grpc.checkSiteOrigin({ origin: shop }, as)).allowed, true, `gRPC call ${i}`);
  const overGrpc = await grpcError(grpc.checkSiteOrigin({ origin: shop }, as));
  t.equal(overGrpc?.code, Code.ResourceExhausted, "the 4th over gRPC");
  t.same(overGrpc?.findDetails(ErrorDetailSchema).map((d) => d.code), ["rate_limited"]);
});
