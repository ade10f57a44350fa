import t from "tap";
import { getOption } from "@bufbuild/protobuf";
import { Credential, route as routeOption } from "../../gen/payments/v1/options_pb.ts";
import { buildRoutes, isCanonicalPath, matchRoute } from "../../gateway/routes.ts";
import { services } from "../../services/app/routes.ts";

const routes = buildRoutes(services);
const base = "/api/v1/merchants/m1/payment-intents";

t.test("the route table", async (t) => {
  const table = routes.map((r) => `${r.httpMethod} ${r.template}`).sort();
  // The spec's merchant routes for payment intents and webhooks, the sandbox, and nothing else
  // (ObservationService is internal gRPC only).
  t.same(table, [
    "GET /api/v1/merchants/{merchant}/payment-intents",
    "GET /api/v1/merchants/{merchant}/payment-intents/{public_id}",
    "GET /api/v1/merchants/{merchant}/payment-intents/export",
    "GET /api/v1/merchants/{merchant}/webhook-deliveries",
    "GET /api/v1/merchants/{merchant}/webhook-endpoints",
    "GET /api/v1/merchants/{merchant}/webhook-endpoints/{endpoint_id}",
    "GET /api/v1/merchants/{merchant}/webhook-events/{event_id}",
    "GET /api/v1/merchants/{merchant}/webhook-events/stream",
    "GET /api/v1/merchants/{merchant}/go-live/readiness",
    "GET /api/v1/api-key",
    "GET /api/v1/merchants/{merchant}/api-keys",
    "GET /api/v1/merchants/{merchant}/api-keys/{api_key_id}",
    "POST /api/v1/merchants/{merchant}/api-keys",
    "POST /api/v1/merchants/{merchant}/api-keys/{api_key_id}/revoke",
    "GET /api/v1/merchants/{merchant}/profile",
    "POST /api/v1/merchants/{merchant}/profile",
    "POST /api/v1/merchants/{merchant}/payment-intents",
    "POST /api/v1/merchants/{merchant}/payment-intents/{public_id}/cancel",
    "POST /api/v1/merchants/{merchant}/webhook-deliveries/{delivery_id}/replay",
    "POST /api/v1/merchants/{merchant}/webhook-endpoints",
    "POST /api/v1/merchants/{merchant}/webhook-endpoints/{endpoint_id}",
    "POST /api/v1/merchants/{merchant}/webhook-endpoints/{endpoint_id}/disable",
    "POST /api/v1/merchants/{merchant}/webhook-endpoints/{endpoint_id}/test",
    "POST /api/v1/sandbox/merchants/{merchant}/payment-intents/{public_id}/simulate",
    "POST /api/v1/sandbox/merchants/{merchant}/refunds/{refund_id}/simulate",
    "GET /api/v1/merchants/{merchant}/payment-intents/{public_id}/refunds",
    "POST /api/v1/merchants/{merchant}/payment-intents/{public_id}/refunds",
    "GET /api/v1/merchants/{merchant}/refunds/{refund_id}",
    "GET /api/v1/merchants/{merchant}/refunds/{refund_id}/psbt",
    "POST /api/v1/merchants/{merchant}/refunds/{refund_id}/cancel",
    "GET /api/v1/qr/{qr_public_id}",
    "GET /api/v1/site-payment-intents/{public_id}",
    "POST /api/v1/site-payment-intents",
    "POST /api/v1/terminal/pos/payment",
  ].sort());
  // Only the create and update routes and simulate take a JSON body; the action routes take none.
  const creates = [
    "/api/v1/merchants/{merchant}/payment-intents",
    "/api/v1/merchants/{merchant}/payment-intents/{public_id}/refunds",
    "/api/v1/merchants/{merchant}/api-keys",
    "/api/v1/merchants/{merchant}/profile",
    "/api/v1/merchants/{merchant}/webhook-endpoints",
    "/api/v1/merchants/{merchant}/webhook-endpoints/{endpoint_id}",
    "/api/v1/sandbox/merchants/{merchant}/payment-intents/{public_id}/simulate",
    "/api/v1/site-payment-intents",
    "/api/v1/terminal/pos/payment",
  ];
  for (const r of routes) t.equal(r.takesBody, r.httpMethod === "POST" && creates.includes(r.template), `${r.template} body`);
});

t.test("the event stream's path is the stream's, not an event id's", async (t) => {
  const m = matchRoute(routes, "GET", "/api/v1/merchants/m1/webhook-events/stream");
  t.equal(m.kind === "found" && m.route.rpc.name, "StreamWebhookEvents");
  t.equal(m.kind === "found" && m.route.rpc.methodKind, "server_streaming");
  const one = matchRoute(routes, "GET", "/api/v1/merchants/m1/webhook-events/evt_1");
  t.equal(one.kind === "found" && one.route.rpc.name, "GetWebhookEvent");
});

t.test("the export's path is the export's, not an intent id's; it answers a CSV file", async (t) => {
  const m = matchRoute(routes, "GET", `${base}/export`);
  t.equal(m.kind === "found" && m.route.rpc.name, "ExportPaymentIntents");
  t.equal(m.kind === "found" && m.route.option.mediaType, "text/csv");
  t.equal(m.kind === "found" && m.route.option.fileName, "payment-intents.csv");
  const sse = matchRoute(routes, "GET", "/api/v1/merchants/m1/webhook-events/stream");
  t.equal(sse.kind === "found" && sse.route.option.mediaType, "", "the event stream: Server-Sent Events");
  const one = matchRoute(routes, "GET", `${base}/pi_1`);
  t.equal(one.kind === "found" && one.route.rpc.name, "GetPaymentIntent");
});

t.test("POST and GET on the collection", async (t) => {
  const post = matchRoute(routes, "POST", base);
  t.equal(post.kind, "found", "POST found");
  if (post.kind === "found") {
    t.equal(post.route.rpc.name, "CreatePaymentIntent");
    t.same(post.params, { merchant: "m1" });
    t.equal(post.route.takesBody, true);
  }
  const get = matchRoute(routes, "GET", base);
  t.equal(get.kind, "found", "GET found");
  if (get.kind === "found") {
    t.equal(get.route.rpc.name, "ListPaymentIntents");
    t.same(get.params, { merchant: "m1" });
    t.equal(get.route.takesBody, false);
  }
});

t.test("item and action routes", async (t) => {
  const get = matchRoute(routes, "GET", `${base}/pi_123`);
  t.equal(get.kind === "found" && get.route.rpc.name, "GetPaymentIntent");
  t.same(get.kind === "found" && get.params, { merchant: "m1", public_id: "pi_123" });
  const cancel = matchRoute(routes, "POST", `${base}/pi_123/cancel`);
  t.equal(cancel.kind === "found" && cancel.route.rpc.name, "CancelPaymentIntent");
  t.same(cancel.kind === "found" && cancel.params, { merchant: "m1", public_id: "pi_123" });
  const event = matchRoute(routes, "GET", "/api/v1/merchants/m1/webhook-events/evt_9");
  t.same(event.kind === "found" && event.params, { merchant: "m1", event_id: "evt_9" });
});

t.test("wrong method", async (t) => {
  t.same(matchRoute(routes, "DELETE", base), { kind: "wrong_method", allow: ["GET", "POST"] }, "DELETE on the collection");
  t.same(matchRoute(routes, "PUT", base), { kind: "wrong_method", allow: ["GET", "POST"] }, "PUT on the collection");
  t.same(matchRoute(routes, "POST", `${base}/pi_1`), { kind: "wrong_method", allow: ["GET"] }, "POST on an item");
  t.same(matchRoute(routes, "GET", `${base}/pi_1/cancel`), { kind: "wrong_method", allow: ["POST"] }, "GET on cancel");
  t.same(matchRoute(routes, "get", base), { kind: "wrong_method", allow: ["GET", "POST"] }, "methods are case-sensitive");
});

t.test("not found", async (t) => {
  for (const path of [
    "/api/v1/merchants/m1/unknown",
    "/api/v1/merchants/m1",
    "/api/v2/merchants/m1/payment-intents",
    "/",
    "",
    `${base}/`,
    `${base}/pi_1/`,
    `${base}/pi_1/cancel/`,
    `${base}//cancel`,
    "/api/v1/merchants//payment-intents",
    `/API/v1/merchants/m1/payment-intents`,
    `${base}?limit=1`,
    `/prefix${base}`,
    `${base}/pi_1/cancel/extra`,
  ]) {
    t.same(matchRoute(routes, "GET", path), { kind: "not_found" }, `GET ${JSON.stringify(path)}`);
  }
  t.same(matchRoute(routes, "POST", `${base}/`), { kind: "not_found" }, "POST with a trailing slash");
});

t.test("percent-encoded segments are decoded", async (t) => {
  const spaced = matchRoute(routes, "GET", "/api/v1/merchants/m%201/payment-intents");
  t.same(spaced.kind === "found" && spaced.params, { merchant: "m 1" }, "%20");
  const slash = matchRoute(routes, "GET", `${base}/pi%2F1`);
  t.same(slash.kind === "found" && slash.params, { merchant: "m1", public_id: "pi/1" }, "an encoded slash stays in its segment");
  const unicode = matchRoute(routes, "GET", "/api/v1/merchants/m%C3%BC/payment-intents");
  t.same(unicode.kind === "found" && unicode.params, { merchant: "mü" }, "UTF-8");
});

t.test("malformed percent-encoding is not found", async (t) => {
  for (const path of [
    "/api/v1/merchants/m%/payment-intents",
    "/api/v1/merchants/m%zz/payment-intents",
    "/api/v1/merchants/%C3/payment-intents",
    `${base}/pi%E0%A4%A`,
  ]) {
    t.same(matchRoute(routes, "GET", path), { kind: "not_found" }, path);
  }
});

t.test("an empty route table", async (t) => {
  t.same(matchRoute([], "GET", base), { kind: "not_found" });
  t.same(buildRoutes([]), []);
});

t.test("canonical paths: the one spelling a route answers to", async (t) => {
  for (const path of [
    "/",
    base,
    `${base}/pi_123/cancel`,
    "/checkout/pi_0123456789abcdefghijABCD",
    "/api/v1/merchants/m%201/payment-intents",
    "/api/v1/merchants/m%C3%BC/payment-intents",
    `${base}/pi_%00`,
    "/a/b:c@d!$&'()*+,;=",
    "/a/.b/c..d/...",
  ]) {
    t.ok(isCanonicalPath(path), `canonical: ${JSON.stringify(path)}`);
  }
  for (const path of [
    "",
    "//",
    "///",
    `//x${base}`,
    `/x/..${base}`,
    `/x/%2e%2e${base}`,
    `/x/%2E%2e${base}`,
    `/x/.%2e${base}`,
    "/api/v1/./merchants/m1/payment-intents",
    "/api/v1/%2e/merchants/m1/payment-intents",
    `${base}/.`,
    `${base}/`,
    `${base}//pi_1`,
    "/api/v1\\merchants/m1/payment-intents",
    "/api/v1%5cmerchants/m1/payment-intents",
    "/api/v1%5Cmerchants/m1/payment-intents",
    `${base}%2Fpi_1`,
    `${base}%2fpi_1`,
    "/api/v1/merchants/%6d1/payment-intents",
    "/api/v1/merchants/m%7e/payment-intents",
    "/api/v1/merchants/m%/payment-intents",
    "/api/v1/merchants/m%zz/payment-intents",
    "/api/v1/merchants/m%4/payment-intents",
    `http://any-host${base}`,
    `*`,
    `${base}?limit=1`,
    `${base}#x`,
    "/api/v1/merchants/m 1/payment-intents",
    "/api/v1/merchants/mü/payment-intents",
    "/api/v1/merchants/m\u0000/payment-intents",
    '/a/"b"',
    "/a/<b>",
  ]) {
    t.notOk(isCanonicalPath(path), `not canonical: ${JSON.stringify(path)}`);
  }
});

t.test("every route an API key or a site credential calls is rate-limited, and so is every public one", async (t) => {
  for (const route of routes) {
    if (([Credential.UNSPECIFIED, Credential.TEST_API_KEY, Credential.SITE_GATEWAY] as Credential[]).includes(route.option.credential) || route.template === "/api/v1/qr/{qr_public_id}") {
      t.ok(route.option.rateLimited, `${route.httpMethod} ${route.template}`);
    }
  }
  const checkSiteOrigin = services.flatMap((s) => s.methods).find((m) => m.name === "CheckSiteOrigin");
  t.ok(checkSiteOrigin && getOption(checkSiteOrigin, routeOption).rateLimited, "CheckSiteOrigin (no REST route) too");
});
