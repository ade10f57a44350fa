// Fuzzing the REST gateway over raw sockets (so nothing normalises the request first): random
// paths, methods, headers, query strings and bodies against the real routes with a valid key.
// Whatever comes in, the answer is never a 5xx, every refusal is the JSON error envelope with
// its X-Request-Id, and a refused request stores nothing.
import assert from "node:assert/strict";
import net from "node:net";
import fc from "fast-check";
import t from "tap";
import { call, idemKey, merchantWithKey, sampleIntent, startTestApp } from "../helpers/harness.ts";

// Checkout pages under /checkout: they answer there in HTML; everything else is the API's.
// No scheduler: an intent created here and expiring mid-run would record an event between the
// counts taken around a refused request.
const { app, base } = await startTestApp(t, { CHECKOUT_BASE_URL: "http://127.0.0.1/checkout", PUBLIC_RATE_LIMIT_PER_MINUTE: "100000", CHECKOUT_RATE_LIMIT_PER_MINUTE: "100000" }, ["rpc", "gateway"]);
const port = Number(new URL(base).port);
const a = await merchantWithKey(app);
const pi = (await call(base, "POST", `/api/v1/merchants/${a.merchant}/payment-intents`, { key: a.key, idempotencyKey: idemKey(), body: sampleIntent })).body.data;
// No real endpoint: every webhook URL the fuzzer can make is refused by the policy, so no delivery leaves the machine.
const endpoint = { id: `we_${"x".repeat(24)}` };

/** Rows a request could create: a refused request must leave every count as it was. */
async function counts(): Promise<string> {
  const tables = ["payment_intents", "webhook_endpoints", "webhook_events", "webhook_deliveries", "idempotency_records", "chain_observations"];
  const rows = await app.db.em.fork().execute<{ n: string }[]>(`select concat_ws(',', ${tables.map((x) => `(select count(*) from ${x})`).join(", ")}) as n`);
  return rows[0]?.n ?? "";
}

interface Sent {
  method: string;
  target: string;
  headers: [string, string][];
  body: Buffer;
  chunked?: boolean;
}

interface Answer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

function decodeChunked(data: Buffer): Buffer {
  const out: Buffer[] = [];
  let at = 0;
  for (;;) {
    const eol = data.indexOf("\r\n", at);
    if (eol < 0) return Buffer.concat(out);
    const size = parseInt(data.subarray(at, eol).toString("latin1"), 16);
    if (!(size > 0)) return Buffer.concat(out);
    out.push(data.subarray(eol + 2, eol + 2 + size));
    at = eol + 2 + size + 2;
  }
}

/** Writes the request byte for byte (Connection: close) and reads the answer until the server closes. */
function send(r: Sent): Promise<Answer> {
  const head = [`${r.method} ${r.target} HTTP/1.1`, "Host: 127.0.0.1", ...r.headers.map(([n, v]) => `${n}: ${v}`)];
  head.push(r.chunked ? "Transfer-Encoding: chunked" : `Content-Length: ${r.body.length}`, "Connection: close");
  // An empty chunked body is the last chunk alone: a zero-length chunk before it would end the body,
  // and the bytes after would be read as a second request (whose 400 hid the first one's answer).
  const body = !r.chunked
    ? r.body
    : r.body.length === 0
      ? Buffer.from("0\r\n\r\n")
      : Buffer.concat([Buffer.from(`${r.body.length.toString(16)}\r\n`), r.body, Buffer.from("\r\n0\r\n\r\n")]);
  const bytes = Buffer.concat([Buffer.from(`${head.join("\r\n")}\r\n\r\n`, "latin1"), body]);
  return new Promise((resolve, reject) => {
    // write, not end: Node's server drops a request whose client half-closes before the answer.
    const socket = net.connect(port, "127.0.0.1", () => socket.write(bytes));
    const chunks: Buffer[] = [];
    socket.setTimeout(10_000, () => socket.destroy(new Error("no answer within 10 s")));
    socket.on("data", (c: Buffer) => chunks.push(c));
    socket.on("error", reject);
    socket.on("close", () => {
      let data = Buffer.concat(chunks);
      // An interim answer (100 Continue, for a request that says Expect: 100-continue) comes before the final one.
      while (/^HTTP\/1\.1 1\d\d /.test(data.subarray(0, 13).toString("latin1")) && data.indexOf("\r\n\r\n") >= 0) {
        data = data.subarray(data.indexOf("\r\n\r\n") + 4);
      }
      const split = data.indexOf("\r\n\r\n");
      const [statusLine = "", ...lines] = data.subarray(0, split < 0 ? data.length : split).toString("latin1").split("\r\n");
      const headers: Record<string, string> = {};
      for (const line of lines) headers[line.slice(0, line.indexOf(":")).toLowerCase()] = line.slice(line.indexOf(":") + 1).trim();
      const rest = split < 0 ? Buffer.alloc(0) : data.subarray(split + 4);
      const payload = headers["transfer-encoding"] === "chunked" ? decodeChunked(rest) : rest;
      resolve({ status: Number(statusLine.split(" ")[1] ?? 0), headers, body: payload.toString("utf8") });
    });
  });
}

/** Sends one request and checks the answer and the database; throws (for fast-check to shrink) on a violation. */
async function check(r: Sent): Promise<void> {
  const before = await counts();
  const res = await send(r);
  const what = `${r.method} ${JSON.stringify(r.target)} → ${res.status} ${res.body.slice(0, 200)}`;
  assert.ok(res.status >= 200 && res.status < 500, `no 5xx and a whole answer: ${what}`);
  if (res.status < 300) return;
  assert.equal(await counts(), before, `a refused request stored nothing: ${what}`);
  // The checkout pages answer their own paths in HTML.
  if (res.headers["content-type"]?.startsWith("text/html")) {
    assert.ok(r.target.startsWith("/checkout"), `HTML only under /checkout: ${what}`);
    return;
  }
  assert.match(res.headers["x-request-id"] ?? "", /^req_/, `X-Request-Id: ${what}`);
  assert.match(res.headers["content-type"] ?? "", /^application\/json/, `JSON: ${what}`);
  if (r.method === "HEAD") return;
  const envelope = JSON.parse(res.body) as { error?: { code?: unknown; message?: unknown; request_id?: unknown } };
  assert.equal(typeof envelope.error?.code, "string", `error.code: ${what}`);
  assert.equal(typeof envelope.error?.message, "string", `error.message: ${what}`);
  assert.equal(envelope.error?.request_id, res.headers["x-request-id"], `error.request_id: ${what}`);
}

async function property(t: { pass(m: string): void; fail(m: string): void }, name: string, arb: fc.Arbitrary<Sent>, numRuns: number): Promise<void> {
  try {
    await fc.assert(fc.asyncProperty(arb, check), { numRuns, endOnFailure: false, interruptAfterTimeLimit: 20_000 });
    t.pass(name);
  } catch (err) {
    // fast-check's message names the seed and the shrunk counterexample.
    const cause = (err as Error).cause;
    t.fail(`${name}: ${(err as Error).message}${cause instanceof Error ? `\nGot: ${cause.message}` : ""}`);
  }
}

const auth: [string, string] = ["Authorization", `Bearer ${a.key}`];
const m = a.merchant;
const templates = [
  `/api/v1/merchants/${m}/payment-intents`,
  `/api/v1/merchants/${m}/payment-intents/${pi.public_id}`,
  `/api/v1/merchants/${m}/payment-intents/${pi.public_id}/cancel`,
  `/api/v1/merchants/${m}/webhook-endpoints`,
  `/api/v1/merchants/${m}/webhook-endpoints/${endpoint.id}`,
  `/api/v1/merchants/${m}/webhook-endpoints/${endpoint.id}/disable`,
  `/api/v1/merchants/${m}/webhook-deliveries`,
  `/api/v1/merchants/${m}/webhook-events/evt_x`,
  `/api/v1/merchants/${m}/go-live/readiness`,
  `/api/v1/sandbox/merchants/${m}/payment-intents/${pi.public_id}/simulate`,
  `/api/v1/site-payment-intents/${pi.public_id}`,
  `/api/v1/qr/qr_x`,
  `/checkout/${pi.public_id}`,
];

const methods = fc.constantFrom("GET", "GET", "POST", "HEAD", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "get", "FROB", "M-SEARCH");
const unicode = fc.constantFrom("ü", "💳", "\u202e", "\ufeff", "\u0000", "\ud800", "ﬀ", "Ａ");
/** A piece of text with what parsers trip on: percent-encodings (good and bad), dots, slashes, unicode. */
const fragment = fc.oneof(
  fc.constantFrom("%00", "%2e", "%2E%2e", "%2f", "%5c", "%", "%zz", "%C3", "%c3%bc", "%F0%9F%92%B3", "%ED%A0%80", "..", ".", "/", "//", "\\", "?", "#", ";", "+", " ", "%20", "\t", "@", ":"),
  unicode.map((c) => encodeURIComponent(c.replace(/[\ud800-\udfff]/g, "x"))),
  unicode,
  fc.string({ maxLength: 6, unit: "binary" }),
);

/** A real route's path with some of its characters replaced or surrounded by fragments. */
const path = fc.tuple(fc.constantFrom(...templates), fc.array(fc.tuple(fc.nat(), fragment, fc.boolean()), { maxLength: 3 })).map(([template, edits]) => {
  let p = template;
  for (const [at, text, replace] of edits) {
    const i = at % (p.length + 1);
    p = p.slice(0, i) + text + p.slice(replace ? i + 1 : i);
  }
  return p;
});

/** A header value as bytes on the wire (latin1): anything, control characters included. */
const headerValue = fc.oneof(
  { weight: 4, arbitrary: fc.string({ maxLength: 40 }) },
  { weight: 1, arbitrary: fc.string({ maxLength: 40, unit: "binary" }) },
  { weight: 2, arbitrary: fc.constantFrom("", " ", "\u0001", "a\rb", "\u007f", "é", "Bearer", "Bearer  x", `Bearer ${a.key}`, "100-continue", "identity", "application/json; charset=\"utf-8\"") },
);
const extraHeaders = fc.array(
  fc.tuple(
    fc.constantFrom("Content-Type", "Content-Encoding", "Authorization", "Idempotency-Key", "Origin", "Accept", "X-Request-Id", "Expect", "Upgrade", "Connection", "X-Fuzz", "Host", "Content-Length", "Transfer-Encoding", "Bad Name", "X:Y"),
    headerValue,
  ),
  { maxLength: 3 },
);

t.test("Expect: 100-continue: the interim 100 Continue, then the whole answer", async (t) => {
  // The shrunk counterexample of a run where the fuzz met this header, now checked every run.
  for (const headers of [[["Expect", "100-continue"]], [auth, ["Expect", "100-continue"]]] as [string, string][][]) {
    const r: Sent = { method: "GET", target: `/api/v1/merchants/${m}/payment-intents`, headers, body: Buffer.alloc(0) };
    await check(r);
    t.pass(`GET with ${headers.map(([n]) => n).join(" and ")}`);
  }
});

t.test("random paths, methods and headers", async (t) => {
  const arb = fc.record({ method: methods, target: path, headers: fc.tuple(fc.boolean(), extraHeaders).map(([withKey, h]) => (withKey ? [auth, ...h] : h)), body: fc.constant(Buffer.alloc(0)) });
  await property(t, "paths", arb, 250);
});

const queryName = fc.constantFrom("limit", "cursor", "status", "created_after", "created_before", "public_id", "merchant_reference", "endpoint_id", "event_id", "metadata", "merchant", "x", "limit[]", "__proto__", "constructor", "");
const queryValue = fc.oneof(
  fc.string({ maxLength: 12, unit: "binary" }).map((s) => encodeURIComponent(s.replace(/[\ud800-\udfff]/g, "x"))),
  fc.constantFrom("%00", "%", "%zz", "%C3", "1", "0", "-1", "201", "1e3", "0x10", "99999999999999999999", "NaN", "true", "pending", "2026-02-30T00:00:00Z", "2026-01-01T00:00:00Z", "2026-01-01T00%3A00%3A00%2B25%3A00", "+", "%2B", "a=b", "&"),
  fc.bigInt({ min: -(2n ** 70n), max: 2n ** 70n }).map(String),
);
const listPaths = [`/api/v1/merchants/${m}/payment-intents`, `/api/v1/merchants/${m}/webhook-endpoints`, `/api/v1/merchants/${m}/webhook-deliveries`, `/api/v1/merchants/${m}/go-live/readiness`];

t.test("random query strings on the list routes", async (t) => {
  const arb = fc.record({
    method: fc.constantFrom("GET", "HEAD", "POST"),
    target: fc.tuple(fc.constantFrom(...listPaths), fc.array(fc.tuple(queryName, queryValue), { maxLength: 4 })).map(([p, q]) => `${p}?${q.map(([k, v]) => `${k}=${v}`).join("&")}`),
    headers: fc.constant<[string, string][]>([auth]),
    body: fc.constant(Buffer.alloc(0)),
  });
  await property(t, "query strings", arb, 200);
});

/** JSON text with what decoders trip on: wrong types, huge numbers, duplicate keys, deep nesting. */
const hugeAmounts = [`"1${"0".repeat(100)}"`, `"0.${"0".repeat(100)}1"`, `"${"9".repeat(40)}.5"`, `"${"9".repeat(78)}"`, '"1e308"', '"-1"', '"0"', '" 1"', '"1.0000000000000000000000001"'];
const jsonValue: fc.Arbitrary<string> = fc.oneof(
  fc.json({ maxDepth: 2 }),
  fc.constantFrom(...hugeAmounts),
  fc.string({ maxLength: 300, unit: "binary" }).map((x) => JSON.stringify(x)),
  fc.constantFrom("1e999", "-0", "123456789012345678901234567890", "1.5", "0.000000000000000000001", "null", "true", '""', '"\\u0000"', '"\\ud800"', '"12.50"', '"ethereum"', '"USDC"', '"confirmed"', '"https://10.0.0.1/x"', '"http://127.0.0.1/x"', '"2026-02-30T00:00:00Z"'),
  fc.nat({ max: 50_000 }).map((n) => `${"[".repeat(n)}${"]".repeat(n)}`),
  fc.nat({ max: 50_000 }).map((n) => `${'{"a":'.repeat(n)}1${"}".repeat(n)}`),
  fc.dictionary(fc.string({ maxLength: 8 }), fc.string({ maxLength: 8 }), { maxKeys: 25 }).map((d) => JSON.stringify(d)),
);
const fieldName = fc.constantFrom("network", "asset", "requested_amount", "merchant_reference", "expires_in_seconds", "metadata", "url", "description", "outcome", "amount", "merchant", "public_id", "__proto__", "Network", "");
/** An object built as text, so a key may appear twice. */
const objectText = fc
  .tuple(fc.boolean(), fc.array(fc.tuple(fieldName, jsonValue), { maxLength: 6 }))
  .map(([valid, fields]) => `{${[...(valid ? Object.entries(sampleIntent).map(([k, v]) => [k, JSON.stringify(v)]) : []), ...fields].map(([k, v]) => `${JSON.stringify(k)}:${v}`).join(",")}}`);
const bodyBytes = fc.oneof(
  { weight: 6, arbitrary: objectText.map((s) => Buffer.from(s)) },
  { weight: 1, arbitrary: jsonValue.map((s) => Buffer.from(s)) },
  { weight: 1, arbitrary: fc.uint8Array({ maxLength: 64 }).map((b) => Buffer.from(b)) },
  { weight: 1, arbitrary: objectText.map((s) => Buffer.concat([Buffer.from(s.slice(0, -1)), Buffer.from(',"merchant_reference":"'), Buffer.from([0xc3, 0x28, 0xff]), Buffer.from('"}')])) },
);
const contentType = fc.constantFrom("application/json", "application/json", "application/json", "application/json", "application/json; charset=utf-8", 'application/json; charset="UTF-8"', "application/json; charset=latin1", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/json;;", "application/json; charset=", "", "*/*", "application/*");
const bodyPaths = [
  `/api/v1/merchants/${m}/payment-intents`,
  `/api/v1/merchants/${m}/webhook-endpoints`,
  `/api/v1/sandbox/merchants/${m}/payment-intents/${pi.public_id}/simulate`,
  `/api/v1/merchants/${m}/payment-intents/${pi.public_id}/cancel`,
  `/api/v1/merchants/${m}/webhook-endpoints/${endpoint.id}/disable`,
  `/api/v1/site-payment-intents`,
];

t.test("a valid body with one field made strange", async (t) => {
  const creates: [string, Record<string, unknown>][] = [
    [`/api/v1/merchants/${m}/payment-intents`, { ...sampleIntent, merchant_reference: "r", expires_in_seconds: 900, metadata: { a: "b" } }],
    [`/api/v1/sandbox/merchants/${m}/payment-intents/${pi.public_id}/simulate`, { outcome: "underpaid", amount: "1" }],
    [`/api/v1/merchants/${m}/webhook-endpoints`, { url: "https://10.0.0.1/x", description: "d" }],
  ];
  const arb = fc.tuple(fc.constantFrom(...creates), fc.nat(), jsonValue).map(([[target, body], at, value]): Sent => {
    const keys = Object.keys(body);
    const key = keys[at % keys.length] as string;
    const text = JSON.stringify({ ...body, [key]: "\u0001" }).replace('"\\u0001"', value);
    return { method: "POST", target, headers: [auth, ["Content-Type", "application/json"], ["Idempotency-Key", idemKey()]], body: Buffer.from(text) };
  });
  await property(t, "one strange field", arb, 250);
});

t.test("random bodies and content types on the POST routes", async (t) => {
  const arb = fc.record({
    method: fc.constant("POST"),
    target: fc.constantFrom(...bodyPaths),
    headers: fc
      .tuple(contentType, fc.oneof({ weight: 8, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: fc.constantFrom("gzip", "identity", "deflate, br") }), fc.boolean())
      .map(([type, encoding, withIdem]) => {
        const h: [string, string][] = [auth, ["Content-Type", type]];
        if (encoding) h.push(["Content-Encoding", encoding]);
        if (withIdem) h.push(["Idempotency-Key", idemKey()]);
        return h;
      }),
    body: bodyBytes,
    chunked: fc.boolean(),
  });
  await property(t, "bodies", arb, 250);
});
