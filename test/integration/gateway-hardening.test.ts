// The REST gateway refuses every malformed input cleanly, each case over real HTTP (raw sockets
// where fetch would fix the request first): NUL characters, non-canonical paths, requests Node's
// parser refuses, CONNECT, two Authorization headers, HEAD, media type parameters, Content-Encoding,
// impossible calendar dates; and the same NUL rule over gRPC.
import net from "node:net";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import t from "tap";
import { ErrorDetailSchema } from "../../gen/payments/v1/options_pb.ts";
import { IntentService } from "../../gen/payments/v1/payment_intents_pb.ts";
import { createSiteCredential } from "../../services/site/credentials.ts";
import { createCashierSession } from "../../services/terminal/sessions.ts";
import { networks } from "../../services/vocabulary/assets.ts";
import { call, idemKey, merchantWithKey, sampleIntent, startTestApp, type ApiResponse } from "../helpers/harness.ts";

// Checkout pages under /checkout, so that everything else is the API's to answer.
const { app, base, rpcUrl } = await startTestApp(t, { CHECKOUT_BASE_URL: "http://127.0.0.1/checkout" });
const port = Number(new URL(base).port);
const a = await merchantWithKey(app);
const em = () => app.db.em.fork();
const intents = `/api/v1/merchants/${a.merchant}/payment-intents`;

async function count(table: string): Promise<number> {
  const rows = await em().execute<{ n: string }[]>(`select count(*)::text as n from ${table}`);
  return Number(rows[0]?.n);
}

interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Sends bytes as they are and reads the first response until the server closes the connection. */
function raw(request: string | Buffer): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, "127.0.0.1", () => socket.write(request));
    const chunks: Buffer[] = [];
    socket.setTimeout(10_000, () => socket.destroy(new Error("no answer within 10 s")));
    socket.on("data", (c: Buffer) => chunks.push(c));
    socket.on("error", reject);
    socket.on("close", () => {
      const text = Buffer.concat(chunks).toString("utf8");
      const split = text.indexOf("\r\n\r\n");
      const [statusLine = "", ...lines] = text.slice(0, split < 0 ? text.length : split).split("\r\n");
      const headers: Record<string, string> = {};
      for (const line of lines) {
        const colon = line.indexOf(":");
        headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
      }
      resolve({ status: Number(statusLine.split(" ")[1] ?? 0), headers, body: split < 0 ? "" : text.slice(split + 4) });
    });
  });
}

/** A request line and headers (Host and Connection: close added), and an optional body. */
function request(line: string, headers: string[] = [], body = ""): Promise<RawResponse> {
  return raw(`${line}\r\nHost: 127.0.0.1\r\n${headers.map((h) => `${h}\r\n`).join("")}Connection: close\r\n\r\n${body}`);
}

type Asserts = Pick<typeof t, "equal" | "match" | "ok">;

/** The error envelope with its request id in the body and the header. */
function refused(t: Asserts, res: RawResponse | ApiResponse, status: number, code: string, name: string, param?: string): void {
  const header = (n: string) => ("get" in res.headers ? (res.headers as Headers).get(n) : (res.headers as Record<string, string>)[n]) ?? undefined;
  let body: { error?: { code?: string; param?: string; request_id?: string } } | undefined;
  try {
    body = typeof res.body === "string" ? JSON.parse(res.body) : res.body;
  } catch {
    body = undefined;
  }
  t.equal(res.status, status, `${name}: status`);
  t.equal(body?.error?.code, code, `${name}: code`);
  t.match(header("content-type"), /^application\/json/, `${name}: JSON`);
  t.match(header("x-request-id"), /^req_/, `${name}: X-Request-Id`);
  t.equal(body?.error?.request_id, header("x-request-id"), `${name}: the same request id in the body`);
  if (param !== undefined) t.equal(body?.error?.param, param, `${name}: param`);
}

t.test("a NUL in any text value is 400 validation_failed naming the field, and nothing is stored", async (t) => {
  const site = await createSiteCredential(em(), a.merchant, "test", []);
  const cashier = await createCashierSession(em(), { merchantId: a.merchant, environment: "test", cashier: "Ana" });
  const endpoints = `/api/v1/merchants/${a.merchant}/webhook-endpoints`;
  const intentsBefore = await count("payment_intents");
  const endpointsBefore = await count("webhook_endpoints");
  const bodies: [string, string, string, Record<string, unknown>, string][] = [
    ["create: merchant_reference", intents, a.key, { ...sampleIntent, merchant_reference: "order\u00001" }, "merchant_reference"],
    ["create: network", intents, a.key, { ...sampleIntent, network: "ethereum\u0000" }, "network"],
    ["create: asset", intents, a.key, { ...sampleIntent, asset: "\u0000" }, "asset"],
    ["create: requested_amount", intents, a.key, { ...sampleIntent, requested_amount: "1\u0000" }, "requested_amount"],
    ["create: a metadata key", intents, a.key, { ...sampleIntent, metadata: { "k\u0000": "v" } }, "metadata"],
    ["create: a metadata value", intents, a.key, { ...sampleIntent, metadata: { k: "v\u0000" } }, "metadata"],
    ["endpoint: url", endpoints, a.key, { url: "https://example.com/\u0000" }, "url"],
    ["endpoint: description", endpoints, a.key, { url: "https://example.com/hook", description: "d\u0000" }, "description"],
    ["site: merchant_reference", "/api/v1/site-payment-intents", site.credential, { ...sampleIntent, merchant_reference: "\u0000" }, "merchant_reference"],
    ["pos: requested_amount", "/api/v1/terminal/pos/payment", cashier.session, { ...sampleIntent, requested_amount: "\u00003" }, "requested_amount"],
  ];
  for (const [name, path, key, body, param] of bodies) {
    refused(t, await call(base, "POST", path, { key, idempotencyKey: idemKey(), body }), 400, "validation_failed", name, param);
  }
  const pi = (await call(base, "POST", intents, { key: a.key, idempotencyKey: idemKey(), body: sampleIntent })).body.data;
  refused(
    t,
    await call(base, "POST", `/api/v1/sandbox/merchants/${a.merchant}/payment-intents/${pi.public_id}/simulate`, { key: a.key, body: { outcome: "confirmed\u0000" } }),
    400,
    "validation_failed",
    "simulate: outcome",
    "outcome",
  );
  const queries: [string, string][] = [
    [`${intents}?merchant_reference=a%00`, "merchant_reference"],
    [`${intents}?public_id=%00`, "public_id"],
    [`${intents}?status=pending%00`, "status"],
    [`${intents}?cursor=%00`, "cursor"],
    [`/api/v1/merchants/${a.merchant}/webhook-deliveries?endpoint_id=we_%00`, "endpoint_id"],
    [`/api/v1/merchants/${a.merchant}/webhook-deliveries?event_id=%00`, "event_id"],
    [`/api/v1/merchants/${a.merchant}/webhook-deliveries?status=%00`, "status"],
    [`${endpoints}?cursor=x%00`, "cursor"],
  ];
  for (const [path, param] of queries) refused(t, await call(base, "GET", path, { key: a.key }), 400, "validation_failed", `GET ${path}`, param);
  t.equal(await count("payment_intents"), intentsBefore + 1, "only the one valid intent was stored");
  t.equal(await count("webhook_endpoints"), endpointsBefore, "no endpoint was stored");
});

t.test("a NUL in a path id is 404 not_found", async (t) => {
  const site = await createSiteCredential(em(), a.merchant, "test", []);
  const m = `/api/v1/merchants/${a.merchant}`;
  const cases: [string, string, string, string][] = [
    ["GET", `${m}/payment-intents/pi_%00`, a.key, "public_id"],
    ["POST", `${m}/payment-intents/pi_%00/cancel`, a.key, "public_id"],
    ["GET", `${m}/webhook-endpoints/we_%00`, a.key, "endpoint_id"],
    ["POST", `${m}/webhook-endpoints/%00/disable`, a.key, "endpoint_id"],
    ["POST", `${m}/webhook-endpoints/%00/test`, a.key, "endpoint_id"],
    ["POST", `${m}/webhook-deliveries/wd_%00/replay`, a.key, "delivery_id"],
    ["GET", `${m}/webhook-events/evt_%00`, a.key, "event_id"],
    ["POST", `/api/v1/sandbox/merchants/${a.merchant}/payment-intents/pi_%00/simulate`, a.key, "public_id"],
    ["GET", `/api/v1/site-payment-intents/pi_%00`, site.credential, "public_id"],
    ["GET", `/api/v1/qr/qr_%00`, "", "qr_public_id"],
  ];
  for (const [method, path, key, param] of cases) {
    const body = path.endsWith("/simulate") ? { outcome: "confirmed" } : undefined;
    refused(t, await call(base, method, path, { key: key || undefined, idempotencyKey: idemKey(), body }), 404, "not_found", `${method} ${path}`, param);
  }
});

t.test("over gRPC the same rule holds, and the error carries the request id", async (t) => {
  const client = createClient(IntentService, createGrpcTransport({ baseUrl: rpcUrl }));
  const headers = { authorization: `Bearer ${a.key}`, "idempotency-key": idemKey() };
  const failure = (p: Promise<unknown>) => p.then(() => undefined, (e: unknown) => ConnectError.from(e));
  const bad = await failure(client.createPaymentIntent({ merchant: a.merchant, ...sampleIntent, requestedAmount: "1", metadata: { k: "\u0000" } }, { headers }));
  t.equal(bad?.code, Code.InvalidArgument);
  t.same(bad?.findDetails(ErrorDetailSchema)[0] && { ...bad.findDetails(ErrorDetailSchema)[0] }, { $typeName: "payments.v1.ErrorDetail", code: "validation_failed", param: "metadata" });
  t.match(bad?.metadata.get("x-request-id"), /^req_/, "the service interceptor still wraps it");
  const missing = await failure(client.getPaymentIntent({ merchant: a.merchant, publicId: "pi_\u0000" }, { headers: { authorization: `Bearer ${a.key}` } }));
  t.equal(missing?.code, Code.NotFound);
  t.equal(missing?.findDetails(ErrorDetailSchema)[0]?.code, "not_found");
  t.equal(missing?.findDetails(ErrorDetailSchema)[0]?.param, "public_id");
});

t.test("// and /// are 404 route_not_found, not a crash", async (t) => {
  for (const path of ["//", "///", "//?x=1"]) refused(t, await request(`GET ${path} HTTP/1.1`), 404, "route_not_found", path);
});

t.test("only canonical paths reach a route", async (t) => {
  const pi = (await call(base, "POST", intents, { key: a.key, idempotencyKey: idemKey(), body: sampleIntent })).body.data;
  const real = `${intents}/${pi.public_id}`;
  t.equal((await request(`GET ${real} HTTP/1.1`, [`Authorization: Bearer ${a.key}`])).status, 200, "the canonical path answers");
  const tricks = [
    `//x${real}`,
    `//${real.slice(1)}`,
    `/x/%2e%2e${real}`,
    `/x/%2E%2E${real}`,
    `/x/..${real}`,
    `/api/v1/./merchants/${a.merchant}/payment-intents/${pi.public_id}`,
    `/api/v1/merchants/${a.merchant}/payment-intents/./${pi.public_id}`,
    `/api/v1\\merchants/${a.merchant}/payment-intents/${pi.public_id}`,
    `/api/v1%5cmerchants/${a.merchant}/payment-intents/${pi.public_id}`,
    `/api/v1%5Cmerchants/${a.merchant}/payment-intents/${pi.public_id}`,
    `/api/v1/merchants%2f${a.merchant}/payment-intents/${pi.public_id}`,
    `${intents}%2F${pi.public_id}`,
    `/api/v1/merchants/${a.merchant.replace(/^m/, "%6d")}/payment-intents/${pi.public_id}`,
    `${real}/`,
    `http://any-host${real}`,
    `http://127.0.0.1:${port}${real}`,
  ];
  for (const target of tricks) {
    refused(t, await request(`GET ${target} HTTP/1.1`, [`Authorization: Bearer ${a.key}`]), 404, "route_not_found", target);
  }
  refused(t, await request(`OPTIONS * HTTP/1.1`), 404, "route_not_found", "OPTIONS *");
  t.equal((await call(base, "GET", `/checkout/${pi.public_id}`)).status, 200, "the checkout page still answers beside the API");
});

t.test("requests Node's parser refuses get the error envelope, with X-Request-Id and Connection: close", async (t) => {
  const cases: [string, string | Buffer, number][] = [
    ["a bad request line", "GARBAGE\r\n\r\n", 400],
    ["a lowercase method", `get ${intents} HTTP/1.1\r\nHost: x\r\n\r\n`, 400],
    ["an unknown method", `FROB ${intents} HTTP/1.1\r\nHost: x\r\n\r\n`, 400],
    ["Content-Length with Transfer-Encoding", `POST ${intents} HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`, 400],
    ["a control character in a header", `GET ${intents} HTTP/1.1\r\nHost: x\r\nX-Note: a\u0001b\r\n\r\n`, 400],
    ["a raw non-ASCII byte in the path", Buffer.concat([Buffer.from(`GET ${intents}/`), Buffer.from([0xe9]), Buffer.from(" HTTP/1.1\r\nHost: x\r\n\r\n")]), 400],
    ["headers over 16 KiB", `GET ${intents} HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(17 * 1024)}\r\n\r\n`, 431],
  ];
  for (const [name, bytes, status] of cases) {
    const res = await raw(bytes);
    refused(t, res, status, status === 431 ? "payload_too_large" : "validation_failed", name);
    t.equal(res.headers.connection, "close", `${name}: Connection: close`);
    t.equal(Number(res.headers["content-length"]), Buffer.byteLength(res.body), `${name}: a complete response`);
  }
});

t.test("an Expect other than 100-continue is ignored, not a bare 417", async (t) => {
  const res = await request(`GET ${intents} HTTP/1.1`, [`Authorization: Bearer ${a.key}`, "Expect: something-else"]);
  t.equal(res.status, 200);
  t.match(res.headers["x-request-id"], /^req_/);
});

t.test("CONNECT is 405 method_not_allowed", async (t) => {
  const res = await raw("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n");
  refused(t, res, 405, "method_not_allowed", "CONNECT");
  t.equal(res.headers.connection, "close");
});

t.test("two Authorization headers are 401 unauthenticated, whichever comes first", async (t) => {
  for (const pair of [
    [`Bearer ${a.key}`, "Bearer sk_test_" + "B".repeat(32)],
    ["Bearer sk_test_" + "B".repeat(32), `Bearer ${a.key}`],
    [`Bearer ${a.key}`, `Bearer ${a.key}`],
    [`Bearer ${a.key}`, ""],
  ]) {
    const res = await request(`GET ${intents} HTTP/1.1`, pair.map((v) => `Authorization: ${v}`));
    refused(t, res, 401, "unauthenticated", `${pair.map((v) => v.slice(0, 10)).join(" + ")}`);
    t.notMatch(res.body, a.key, "no key echoed");
  }
  t.equal((await request(`GET ${intents} HTTP/1.1`, [`Authorization: Bearer ${a.key}`])).status, 200, "one header still works");
});

t.test("one rule for credentials: no Bearer is unauthenticated, any token that is not an active key is invalid_api_key", async (t) => {
  refused(t, await call(base, "GET", intents), 401, "unauthenticated", "no header");
  refused(t, await call(base, "GET", intents, { headers: { authorization: "Basic abc" } }), 401, "unauthenticated", "not Bearer");
  refused(t, await call(base, "GET", intents, { headers: { authorization: "Bearer" } }), 401, "unauthenticated", "Bearer without a token");
  for (const token of ["x", "sk_test_short", `sk_test_${"A".repeat(32)}`, `sk_prod_${"A".repeat(32)}`, `site_test_${"A".repeat(32)}`]) {
    const res = await call(base, "GET", intents, { key: token });
    refused(t, res, 401, "invalid_api_key", token);
    // (A one-letter token could turn up in a random request id.)
    if (token.length > 8) t.notOk(JSON.stringify(res.body).includes(token), "the token is not echoed");
  }
});

t.test("HEAD answers like GET without a body", async (t) => {
  const get = await request(`GET ${intents} HTTP/1.1`, [`Authorization: Bearer ${a.key}`]);
  const head = await request(`HEAD ${intents} HTTP/1.1`, [`Authorization: Bearer ${a.key}`]);
  t.equal(head.status, 200);
  t.equal(head.body, "", "no body");
  t.equal(head.headers["content-type"], get.headers["content-type"]);
  t.match(head.headers["x-request-id"], /^req_/);
  const headMissing = await request(`HEAD ${intents}/pi_${"Z".repeat(24)} HTTP/1.1`, [`Authorization: Bearer ${a.key}`]);
  t.equal(headMissing.status, 404, "an error keeps its status");
  t.equal(headMissing.body, "");
  t.match(headMissing.headers["x-request-id"], /^req_/);
  const onPost = await request(`HEAD ${intents}/pi_x/cancel HTTP/1.1`, [`Authorization: Bearer ${a.key}`]);
  t.equal(onPost.status, 405, "HEAD on a POST-only route");
  t.equal(onPost.headers.allow, "POST");
});

t.test("Content-Type parameters per RFC 9110; any other charset or a Content-Encoding is 415", async (t) => {
  const create = (headers: Record<string, string>, body: string | Buffer = JSON.stringify(sampleIntent)) =>
    call(base, "POST", intents, { key: a.key, idempotencyKey: idemKey(), body, headers });
  for (const type of [
    "application/json",
    'application/json; charset="utf-8"',
    "application/json;charset=UTF-8",
    "Application/JSON; Charset=utf-8",
    'application/json ; charset="UTF-8" ;',
  ]) {
    t.equal((await create({ "content-type": type })).status, 200, type);
  }
  const before = await count("payment_intents");
  for (const type of ["application/json; charset=latin1", 'application/json; charset="utf-16"', "application/json; charset=utf-8; charset=utf-8", "application/json; foo", "text/json", "application/jsonx"]) {
    refused(t, await create({ "content-type": type }), 415, "unsupported_media_type", type);
  }
  for (const encoding of ["gzip", "br", "identity, gzip", "x-unknown"]) {
    refused(t, await create({ "content-type": "application/json", "content-encoding": encoding }), 415, "unsupported_media_type", `Content-Encoding: ${encoding}`);
  }
  t.equal(await count("payment_intents"), before, "nothing was stored");
  t.equal((await create({ "content-type": "application/json", "content-encoding": "identity" })).status, 200, "identity is no encoding");
});

t.test("a timestamp must be a real calendar date and time", async (t) => {
  for (const value of ["2026-02-30T00:00:00Z", "2025-02-29T00:00:00Z", "2026-04-31T00:00:00Z", "2026-01-01T24:00:00Z", "2026-01-01T23:60:00Z", "2026-01-01T23:59:60Z", "2026-13-01T00:00:00Z", "2026-01-01T00:00:00+24:00"]) {
    refused(t, await call(base, "GET", `${intents}?created_after=${encodeURIComponent(value)}`, { key: a.key }), 400, "validation_failed", value, "created_after");
  }
  refused(t, await call(base, "GET", `${intents}?created_before=2026-00-10T00:00:00Z`, { key: a.key }), 400, "validation_failed", "created_before", "created_before");
  t.equal((await call(base, "GET", `${intents}?created_after=2024-02-29T23:59:59.999%2B05:30`, { key: a.key })).status, 200, "a leap day with an offset");
});

t.test("a Host header is required once: none or two is 400 in the envelope", async (t) => {
  const none = await raw(`GET ${intents} HTTP/1.1\r\nAuthorization: Bearer ${a.key}\r\nConnection: close\r\n\r\n`);
  refused(t, none, 400, "validation_failed", "no Host", "Host");
  const two = await raw(`GET ${intents} HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: other.example\r\nAuthorization: Bearer ${a.key}\r\nConnection: close\r\n\r\n`);
  refused(t, two, 400, "validation_failed", "two Host headers", "Host");
  const http10 = await raw(`GET ${intents} HTTP/1.0\r\nAuthorization: Bearer ${a.key}\r\n\r\n`);
  t.equal(http10.status, 200, "HTTP/1.0 may omit Host");
  t.equal((await request(`GET ${intents} HTTP/1.1`, [`Authorization: Bearer ${a.key}`])).status, 200, "one Host still works");
});

t.test("a JSON body that repeats a key is 400 invalid_json naming it, on REST and on the rpc port, and nothing is created", async (t) => {
  const before = await count("payment_intents");
  const bodies: [string, string][] = [
    ['{"network":"ethereum","asset":"USDC","requested_amount":"1.00","network":"bitcoin"}', "network"],
    ['{"network":"ethereum","asset":"USDC","requested_amount":"1.00","\\u006eetwork":"bitcoin"}', "network"],
    ['{"network":"ethereum","asset":"USDC","requested_amount":"1.00","metadata":{"order":"1","order":"2"}}', "metadata.order"],
  ];
  for (const [body, key] of bodies) {
    const res = await request(`POST ${intents} HTTP/1.1`, [`Authorization: Bearer ${a.key}`, `Idempotency-Key: ${idemKey()}`, "Content-Type: application/json", `Content-Length: ${Buffer.byteLength(body)}`], body);
    refused(t, res, 400, "invalid_json", `REST: ${key}`, key);
    t.match(JSON.parse(res.body).error.message, `"${key}"`, "the message names the key");
    const rpc = await fetch(`${rpcUrl}/payments.v1.IntentService/CreatePaymentIntent`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${a.key}`, "idempotency-key": idemKey() },
      body: body.replace("{", `{"merchant":"${a.merchant}",`),
    });
    const err = (await rpc.json()) as { code?: string; message?: string };
    t.equal(rpc.status, 400, `Connect: ${key}: status`);
    t.equal(err.code, "invalid_argument", `Connect: ${key}: code`);
    t.match(err.message, `"${key}"`, `Connect: ${key}: the message names the key`);
  }
  const distinct = '{"network":"ethereum","asset":"USDC","requested_amount":"1.00","metadata":{"network":"x"}}';
  const ok = await request(`POST ${intents} HTTP/1.1`, [`Authorization: Bearer ${a.key}`, `Idempotency-Key: ${idemKey()}`, "Content-Type: application/json", `Content-Length: ${distinct.length}`], distinct);
  t.equal(ok.status, 200, "the same key in a nested object is not a repeat");
  t.equal(await count("payment_intents"), before + 1, "only that one was created");
});

t.test("messages say what was wrong: an empty or whitespace body alike, an empty string, a number out of the field's range", async (t) => {
  const before = await count("payment_intents");
  const missingNetwork = `"network" is missing or empty: one of ${networks.join(", ")}; or send "payment_methods" instead.`;
  const post = (body: string) =>
    request(`POST ${intents} HTTP/1.1`, [`Authorization: Bearer ${a.key}`, `Idempotency-Key: ${idemKey()}`, "Content-Type: application/json", `Content-Length: ${Buffer.byteLength(body)}`], body);
  for (const [body, name] of [
    ["", "an empty body"],
    ["  \r\n\t ", "a body of whitespace"],
  ] as const) {
    const res = await post(body);
    refused(t, res, 400, "validation_failed", name, "network");
    t.equal(JSON.parse(res.body).error.message, missingNetwork, `${name}: the same answer`);
  }
  const empty = await post('{"network":"","asset":"USDC","requested_amount":"1.00"}');
  refused(t, empty, 400, "validation_failed", "an empty string", "network");
  t.equal(JSON.parse(empty.body).error.message, missingNetwork, "sent but empty: not called absent");
  const far = await post('{"network":"ethereum","asset":"USDC","requested_amount":"1.00","expires_in_seconds":99999999999}');
  refused(t, far, 400, "validation_failed", "an integer beyond int32", "expires_in_seconds");
  t.equal(JSON.parse(far.body).error.message, '"expires_in_seconds" must be a whole number from -2147483648 to 2147483647.', "the range, not just 'an integer'");
  const nbsp = await post("\u00a0");
  t.equal(JSON.parse(nbsp.body).error?.code, "invalid_json", "a non-breaking space is not JSON whitespace");
  t.equal(await count("payment_intents"), before, "nothing was created");
});
