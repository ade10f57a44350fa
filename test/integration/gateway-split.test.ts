// A gateway-only deployment: the REST gateway in one app, calling the rpc role of
// another (RPC_URL) over gRPC; both share the database and the master key. The main
// REST flows must answer as they do in one process, headers included, and a missing
// rpc role must be a 503 the client can retry, not a 500.
import { createHmac } from "node:crypto";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import t, { type Test } from "tap";
import { DashboardService } from "../../gen/payments/v1/dashboard_pb.ts";
import { dashboardCallHeader, dashboardCallProof, dashboardCallSecret } from "../../services/auth/dashboard-sessions.ts";
import { createSiteCredential } from "../../services/site/credentials.ts";
import { call, idemKey, merchantWithKey, sampleIntent, startTestApp, until, type ApiResponse, type SplitTestApp } from "../helpers/harness.ts";
import { dashboardClient } from "../helpers/dashboard.ts";
import { hookHost, webhookSetup, type WebhookSetup } from "../helpers/webhooks.ts";

// Through startTestApp, as any acceptance test run with TEST_SPLIT=1 would be.
process.env.TEST_SPLIT = "1";
const s = (await webhookSetup(t)) as WebhookSetup & SplitTestApp;
const { base, creds: a } = s;
const b = await merchantWithKey(s.app);
const intents = (c: { merchant: string }) => `/api/v1/merchants/${c.merchant}/payment-intents`;

/** An error answer in the documented envelope, its request id the X-Request-Id header. */
function isEnvelope(t: Test, res: ApiResponse, status: number, code: string, param?: string): void {
  t.equal(res.status, status, `${code}: status`);
  t.equal(res.body?.error?.code, code, `${code}: code`);
  t.match(res.body?.error?.message, /\S/, `${code}: a message`);
  t.equal(res.body?.error?.param, param, `${code}: param`);
  t.match(res.headers.get("x-request-id"), /^req_/, `${code}: X-Request-Id`);
  t.equal(res.body?.error?.request_id, res.headers.get("x-request-id"), `${code}: request_id is the header's`);
}

t.test("the gateway runs alone and reaches the services over gRPC", async (t) => {
  t.equal(s.gatewayApp.ports.rpc, undefined, "no rpc role beside the gateway");
  t.equal(s.rpcApp.ports.gateway, undefined, "no gateway beside the rpc role");
  t.not(s.gatewayApp.ports.gateway, undefined);
});

t.test("create: idempotent replay keeps its header, a different body is a conflict", async (t) => {
  const key = idemKey();
  const first = await call(base, "POST", intents(a), { key: a.key, idempotencyKey: key, body: { ...sampleIntent, merchant_reference: "split-1" } });
  t.equal(first.status, 200, JSON.stringify(first.body));
  t.equal(first.headers.get("idempotent-replayed"), null, "a first request is not a replay");
  t.match(first.headers.get("x-request-id"), /^req_/);
  t.match(first.body.data, { status: "pending", merchant_reference: "split-1", environment: "test", source: "api" });

  const again = await call(base, "POST", intents(a), { key: a.key, idempotencyKey: key, body: { ...sampleIntent, merchant_reference: "split-1" } });
  t.equal(again.status, 200);
  t.equal(again.headers.get("idempotent-replayed"), "true", "Idempotent-Replayed crosses the gRPC hop");
  t.same(again.body, first.body, "the replay is the first answer");
  t.not(again.headers.get("x-request-id"), first.headers.get("x-request-id"), "each request has its own id");

  const conflict = await call(base, "POST", intents(a), { key: a.key, idempotencyKey: key, body: { ...sampleIntent, requested_amount: "99" } });
  isEnvelope(t, conflict, 409, "idempotency_conflict");
  const [row] = await s.app.db.em.fork().execute<{ n: number }[]>(`select count(*)::int as n from payment_intents where merchant_reference = 'split-1'`);
  t.equal(row?.n, 1, "one intent");
});

t.test("list with cursors, get and cancel", async (t) => {
  const c = await merchantWithKey(s.app);
  const made: string[] = [];
  for (let i = 0; i < 5; i++) {
    const res = await call(base, "POST", intents(c), { key: c.key, idempotencyKey: idemKey(), body: sampleIntent });
    t.equal(res.status, 200);
    made.push(res.body.data.public_id);
  }
  const seen: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const page: ApiResponse = await call(base, "GET", `${intents(c)}?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`, { key: c.key });
    t.equal(page.status, 200);
    t.ok(page.body.data.length <= 2);
    seen.push(...page.body.data.map((pi: { public_id: string }) => pi.public_id));
    t.equal(page.body.has_more, page.body.next_cursor !== null, "has_more and next_cursor agree");
    cursor = page.body.next_cursor;
    pages++;
  } while (cursor !== null && pages < 10);
  t.equal(pages, 3, "5 intents in pages of 2");
  t.same([...seen].sort(), [...made].sort(), "every intent once across the pages");

  const badCursor = await call(base, "GET", `${intents(c)}?cursor=not-a-cursor`, { key: c.key });
  isEnvelope(t, badCursor, 400, "invalid_cursor", "cursor");

  const got = await call(base, "GET", `${intents(c)}/${made[0]}`, { key: c.key });
  t.equal(got.status, 200);
  t.equal(got.body.data.public_id, made[0]);
  const cancelled = await call(base, "POST", `${intents(c)}/${made[0]}/cancel`, { key: c.key });
  t.equal(cancelled.status, 200);
  t.equal(cancelled.body.data.status, "cancelled");
  isEnvelope(t, await call(base, "POST", `${intents(c)}/${made[0]}/cancel`, { key: c.key }), 409, "invalid_state");
});

t.test("errors keep the envelope, code, param and request id across the hop", async (t) => {
  isEnvelope(t, await call(base, "GET", intents(a)), 401, "unauthenticated");
  isEnvelope(t, await call(base, "GET", intents(a), { key: `sk_test_${"Q".repeat(32)}` }), 401, "invalid_api_key");
  isEnvelope(t, await call(base, "GET", intents(a), { key: b.key }), 403, "merchant_mismatch", "merchant");
  const reader = await merchantWithKey(s.app, "test", ["payment_intents:read"], a.merchant);
  isEnvelope(t, await call(base, "POST", intents(a), { key: reader.key, idempotencyKey: idemKey(), body: sampleIntent }), 403, "insufficient_scope");
  isEnvelope(t, await call(base, "GET", `${intents(a)}/pi_doesnotexist`, { key: a.key }), 404, "not_found", "public_id");
  isEnvelope(t, await call(base, "POST", intents(a), { key: a.key, idempotencyKey: idemKey(), body: { ...sampleIntent, requested_amount: "-1" } }), 400, "validation_failed", "requested_amount");
  isEnvelope(t, await call(base, "POST", intents(a), { key: a.key, body: sampleIntent }), 400, "idempotency_key_required");
  const otherMerchants = await call(base, "POST", intents(b), { key: b.key, idempotencyKey: idemKey(), body: sampleIntent });
  isEnvelope(t, await call(base, "GET", `${intents(a)}/${otherMerchants.body.data.public_id}`, { key: a.key }), 404, "not_found", "public_id");
});

t.test("a webhook endpoint is created and the worker behind the rpc role delivers to it", async (t) => {
  const ep = await s.createEndpoint("/hooks/split");
  t.match(ep.secret, /^whsec_/);
  const created = await call(base, "POST", intents(a), { key: a.key, idempotencyKey: idemKey(), body: sampleIntent });
  const id = created.body.data.public_id;
  const request = await until(
    "the payment.intent.created webhook",
    async () => s.receiver.requests.find((r) => r.url === "/hooks/split" && JSON.parse(r.body.toString()).data?.payment_intent?.public_id === id),
    15_000,
  );
  const expected = createHmac("sha256", ep.secret).update(`${request.headers["x-service-timestamp"]}.`).update(request.body).digest("hex");
  t.equal(request.headers["x-service-signature"], expected, "signed with the endpoint's secret");
  t.equal(JSON.parse(request.body.toString()).type, "payment.intent.created");
  const listed = await until(
    "the delivery listed as delivered",
    async () => {
      const res = await call(base, "GET", `/api/v1/merchants/${a.merchant}/webhook-deliveries?endpoint_id=${ep.id}`, { key: a.key });
      return res.body.data?.find((d: { status: string }) => d.status === "delivered");
    },
    15_000,
  );
  t.equal(listed.endpoint_id, ep.id);
  const foreign = await call(base, "GET", `/api/v1/merchants/${b.merchant}/webhook-endpoints/${ep.id}`, { key: b.key });
  isEnvelope(t, foreign, 404, "not_found", "endpoint_id");
  const badUrl = await call(base, "POST", `/api/v1/merchants/${a.merchant}/webhook-endpoints`, { key: a.key, body: { url: `http://${hookHost}/x` } });
  isEnvelope(t, badUrl, 400, "validation_failed", "url");
});

t.test("sandbox simulate", async (t) => {
  const created = await call(base, "POST", intents(a), { key: a.key, idempotencyKey: idemKey(), body: { ...sampleIntent, requested_amount: "10" } });
  const path = `/api/v1/sandbox/merchants/${a.merchant}/payment-intents/${created.body.data.public_id}/simulate`;
  const paid = await call(base, "POST", path, { key: a.key, body: { outcome: "confirmed" } });
  t.equal(paid.status, 200, JSON.stringify(paid.body));
  t.equal(paid.body.data.status, "confirmed");
  t.equal(paid.body.data.amount_received, "10");
  isEnvelope(t, await call(base, "POST", path, { key: a.key, body: { outcome: "sideways" } }), 400, "validation_failed", "outcome");
});

t.test("the event stream crosses the hop as a gRPC server stream: accepted, an event, a refusal as JSON", async (t) => {
  const refused = await call(base, "GET", `/api/v1/merchants/${a.merchant}/webhook-events/stream?after=nope`, { key: a.key });
  isEnvelope(t, refused, 400, "validation_failed", "after");
  const abort = new AbortController();
  t.teardown(() => abort.abort());
  const res = await fetch(`${base}/api/v1/merchants/${a.merchant}/webhook-events/stream`, { headers: { authorization: `Bearer ${a.key}` }, signal: abort.signal });
  t.equal(res.status, 200);
  t.match(res.headers.get("content-type"), /^text\/event-stream/);
  const created = await call(base, "POST", intents(a), { key: a.key, idempotencyKey: idemKey(), body: sampleIntent });
  const reader = res.body!.getReader();
  let text = "";
  const decoder = new TextDecoder();
  await until("the create's event on the stream", async () => {
    text += decoder.decode((await reader.read()).value, { stream: true });
    return text.includes(created.body.data.public_id);
  }, 20_000);
  const event = text.split("\n").filter((l) => l.startsWith("data: ")).map((l) => JSON.parse(l.slice(6))).find((m) => m.event)?.event;
  t.match(event, { id: /^evt_/, type: "payment.intent.created", payload: String });
  t.equal(JSON.parse(event.payload).data.payment_intent.public_id, created.body.data.public_id, "the payload is the event's envelope");
  abort.abort();
});

t.test("site gateway: CORS headers survive the hop, on answers and on errors", async (t) => {
  const shop = "https://shop.example";
  const site = await createSiteCredential(s.app.db.em.fork(), a.merchant, "test", [shop]);
  const created = await call(base, "POST", "/api/v1/site-payment-intents", { key: site.credential, idempotencyKey: idemKey(), body: sampleIntent, headers: { origin: shop } });
  t.equal(created.status, 200, JSON.stringify(created.body));
  t.equal(created.headers.get("access-control-allow-origin"), shop);
  t.match(created.headers.get("access-control-expose-headers") ?? "", /X-Request-Id/);
  const other = await call(base, "POST", "/api/v1/site-payment-intents", { key: site.credential, idempotencyKey: idemKey(), body: sampleIntent, headers: { origin: "https://evil.example" } });
  // Issue 29: another origin is refused outright now (it was 200, only without CORS headers).
  t.equal(other.status, 403);
  t.equal(other.headers.get("access-control-allow-origin"), null, "another origin gets no CORS header");
  const missing = await call(base, "GET", "/api/v1/site-payment-intents/pi_unknown", { key: site.credential, headers: { origin: shop } });
  isEnvelope(t, missing, 404, "not_found", "public_id");
  t.equal(missing.headers.get("access-control-allow-origin"), shop, "an allowed origin may read the error");
  const preflight = await fetch(`${base}/api/v1/site-payment-intents`, { method: "OPTIONS", headers: { origin: shop, "access-control-request-method": "POST" } });
  t.equal(preflight.status, 204);
  t.equal(preflight.headers.get("access-control-allow-origin"), shop, "the preflight asks the rpc role which origins are allowed");
});

t.test("the dashboard of a gateway-only process: its calls are proven to the rpc role, and its session is no API credential", async (t) => {
  const made = await call(base, "POST", intents(a), { key: a.key, idempotencyKey: idemKey(), body: sampleIntent });
  const c = dashboardClient(base);
  t.equal((await c.signIn(a.key)).status, 303);
  const page = await c.get("/dashboard/payments");
  t.equal(page.status, 200);
  t.match(page.body, made.body.data.public_id, "the dashboard lists the intent");
  const token = c.session() ?? "";
  isEnvelope(t, await call(base, "GET", intents(a), { key: token }), 401, "invalid_api_key");
  // Straight to the rpc role: only the proof made with the master key makes it a dashboard call.
  const dashboard = createClient(DashboardService, createGrpcTransport({ baseUrl: s.rpcUrl }));
  const withProof = (proof: string) => ({ headers: { authorization: `Bearer ${token}`, [dashboardCallHeader]: proof } });
  for (const [name, proof] of [
    ["no proof", ""],
    ["a made-up proof", "A".repeat(43)],
    ["another master key's", dashboardCallProof(dashboardCallSecret(Buffer.alloc(32, 7)), token)],
  ] as const) {
    const err = await dashboard.getDashboardSession({}, withProof(proof)).then(() => undefined, (e: unknown) => ConnectError.from(e));
    t.equal(err?.code, Code.Unauthenticated, name);
  }
  const session = await dashboard.getDashboardSession({}, withProof(dashboardCallProof(dashboardCallSecret(s.masterKey), token)));
  t.equal(session.data?.merchantId, a.merchant, "the dashboard's own proof");
});

// Last: it stops the rpc role.
t.test("with the rpc role down the gateway answers 503 unavailable, with Retry-After, naming no address", async (t) => {
  await s.stopRpc();
  const rpcPort = String(s.rpcApp.ports.rpc);
  const cases: [string, string, Parameters<typeof call>[3]][] = [
    ["GET", intents(a), { key: a.key }],
    ["POST", intents(a), { key: a.key, idempotencyKey: idemKey(), body: sampleIntent }],
    ["GET", intents(a), {}],
  ];
  for (const [method, path, options] of cases) {
    const res = await call(base, method, path, options);
    isEnvelope(t, res, 503, "unavailable");
    t.match(res.headers.get("retry-after"), /^[1-9][0-9]*$/, "Retry-After in seconds");
    const text = JSON.stringify(res.body);
    t.notMatch(text, /127\.0\.0\.1|localhost|ECONNREFUSED|::1/, "no internal address in the answer");
    t.notOk(text.includes(rpcPort), "no internal port in the answer");
  }

  // An rpc role back on the same address is used again, without restarting the gateway.
  await startTestApp(t, { DATABASE_URL: s.databaseUrl, RPC_PORT: rpcPort, JETSTREAM_PREFIX: s.prefix }, ["rpc"], s.masterKey);
  const back = await until("the gateway answering again", async () => {
    const res = await call(base, "GET", intents(a), { key: a.key });
    return res.status === 200 ? res : undefined;
  }, 10_000);
  t.ok(back.body.data.length > 0, "the data is there again");
});
