// The rpc port (gRPC, gRPC-Web, Connect over h2c) refuses oversized and malformed input the
// way REST does: before reading it all, with a documented code as a payments.v1.ErrorDetail
// and a message safe to show. Raw HTTP/2 requests, so the bytes on the wire are ours.
import http2 from "node:http2";
import { create, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { errorFromJsonBytes } from "@connectrpc/connect/protocol-connect";
import { findTrailerError } from "@connectrpc/connect/protocol-grpc";
import { trailerFlag, trailerParse } from "@connectrpc/connect/protocol-grpc-web";
import t, { type Test } from "tap";
import { ErrorDetailSchema } from "../../gen/payments/v1/options_pb.ts";
import { GetPaymentIntentRequestSchema, IntentService } from "../../gen/payments/v1/payment_intents_pb.ts";
import { setTimeout as sleep } from "node:timers/promises";
import { startRpcServer } from "../../services/rpc/server.ts";
import { merchantWithKey, startTestApp } from "../helpers/harness.ts";

const limit = 1024 * 1024;
const { app, rpcUrl } = await startTestApp(t, { BODY_LIMIT_BYTES: String(limit) }, ["rpc"]);
const a = await merchantWithKey(app);
const auth = { authorization: `Bearer ${a.key}` };
const createPath = "/payments.v1.IntentService/CreatePaymentIntent";
const getPath = "/payments.v1.IntentService/GetPaymentIntent";

type Protocol = "connect" | "grpc" | "grpc-web";

interface Answer {
  status: number;
  headers: Headers;
  trailers: Headers;
  body: Buffer;
  /** Request body bytes the client got to hand to the stream before the server answered. */
  sent: number;
}

function toHeaders(h: http2.IncomingHttpHeaders): Headers {
  const out = new Headers();
  for (const [k, v] of Object.entries(h)) if (!k.startsWith(":") && v !== undefined) out.set(k, Array.isArray(v) ? v.join(", ") : String(v));
  return out;
}

/**
 * One POST over h2c. `body` is sent, then `filler` bytes in 64 KiB chunks, as long as the server
 * takes them (flow control) and has not answered: what a server that buffers everything would read.
 */
async function post(path: string, headers: Record<string, string>, body: Uint8Array, filler = 0): Promise<Answer> {
  const session = http2.connect(rpcUrl);
  session.on("error", () => undefined);
  try {
    const req = session.request({ ":method": "POST", ":path": path, ...headers });
    req.on("error", () => undefined);
    const chunks: Buffer[] = [];
    let status = 0;
    let head = new Headers();
    let trailers = new Headers();
    req.on("response", (h) => {
      status = Number(h[":status"]);
      head = toHeaders(h);
    });
    req.on("trailers", (h) => (trailers = toHeaders(h)));
    req.on("data", (c: Buffer) => chunks.push(c));
    const closed = new Promise<void>((resolve) => req.once("close", resolve));
    // The answer is complete at the end of its body, though the stream may still hold body of ours
    // that the server never read: the session is dropped then.
    const ended = new Promise<void>((resolve) => req.once("end", resolve));
    const answered = new Promise<void>((resolve) => req.once("response", () => resolve()));
    let done = false;
    void closed.then(() => (done = true));
    const deadline = setTimeout(() => req.close(http2.constants.NGHTTP2_CANCEL), 30_000);
    let sent = 0;
    if (body.length > 0) {
      req.write(body);
      sent += body.length;
    }
    const chunk = Buffer.alloc(64 * 1024, 0x41);
    while (sent - body.length < filler && !done && status === 0) {
      const more = req.write(chunk);
      sent += chunk.length;
      if (!more) await Promise.race([new Promise((resolve) => req.once("drain", resolve)), closed, answered]);
    }
    if (status === 0 && !done) req.end();
    await Promise.race([closed, ended]);
    clearTimeout(deadline);
    return { status, headers: head, trailers, body: Buffer.concat(chunks), sent };
  } finally {
    session.destroy();
  }
}

function envelope(payload: Uint8Array, flags = 0, declared = payload.length): Buffer {
  const head = Buffer.alloc(5);
  head.writeUInt8(flags, 0);
  head.writeUInt32BE(declared, 1);
  return Buffer.concat([head, payload]);
}

/** The error an answer carries, read the way each protocol's client reads it; undefined for a success. */
function errorOf(protocol: Protocol, answer: Answer): ConnectError | undefined {
  if (protocol === "connect") {
    if (answer.status === 200) return undefined;
    return errorFromJsonBytes(answer.body, answer.headers, new ConnectError(`HTTP ${answer.status} without an error body`, Code.Unknown));
  }
  if (protocol === "grpc") {
    const trailer = answer.trailers.has("grpc-status") ? answer.trailers : answer.headers;
    return findTrailerError(trailer) ?? (trailer.has("grpc-status") ? undefined : new ConnectError(`HTTP ${answer.status} without grpc-status`, Code.Unknown));
  }
  let offset = 0;
  while (offset + 5 <= answer.body.length) {
    const flags = answer.body.readUInt8(offset);
    const length = answer.body.readUInt32BE(offset + 1);
    const data = answer.body.subarray(offset + 5, offset + 5 + length);
    offset += 5 + length;
    if ((flags & trailerFlag) === trailerFlag) return findTrailerError(trailerParse(data));
  }
  return new ConnectError(`HTTP ${answer.status} without a gRPC-Web trailer`, Code.Unknown);
}

const contentTypes: Record<Protocol, { proto: string; json: string }> = {
  connect: { proto: "application/proto", json: "application/json" },
  grpc: { proto: "application/grpc+proto", json: "application/grpc+json" },
  "grpc-web": { proto: "application/grpc-web+proto", json: "application/grpc-web+json" },
};

/** A unary request of one protocol: gRPC and gRPC-Web frame the message, Connect sends it as it is. */
function unary(protocol: Protocol, path: string, format: "proto" | "json", message: Uint8Array, headers: Record<string, string> = {}, filler = 0) {
  const framed = protocol === "connect" ? message : envelope(message);
  const h: Record<string, string> = { "content-type": contentTypes[protocol][format], ...headers };
  if (protocol === "grpc") h.te = "trailers";
  return post(path, h, framed, filler);
}

function expectDetail(t: Test, err: ConnectError | undefined, code: Code, errorCode: string, what: string) {
  t.ok(err, `${what}: an error`);
  t.equal(err?.code, code, `${what}: ${Code[code]}`);
  t.equal(err?.findDetails(ErrorDetailSchema)[0]?.code, errorCode, `${what}: ErrorDetail ${errorCode}`);
  t.notMatch(err?.rawMessage ?? "", /wire type|premature|cannot decode|parse binary|protocol error|readMaxBytes|JSON at position|Unexpected token/i, `${what}: no parser text`);
  t.match(err?.metadata.get("x-request-id") ?? "", /^req_/, `${what}: x-request-id`);
}

const big = 64 * 1024 * 1024;
const mb = 1024 * 1024;

t.test("a request past BODY_LIMIT_BYTES is refused before it is read, before credentials", async (t) => {
  const rssBefore = process.memoryUsage().rss;
  const cases: [string, Protocol, () => Promise<Answer>][] = [
    ["Connect with Content-Length", "connect", () => post(createPath, { "content-type": "application/proto", "content-length": String(big) }, new Uint8Array(0), big)],
    ["Connect streamed, no Content-Length", "connect", () => post(createPath, { "content-type": "application/json" }, new Uint8Array(0), big)],
    ["gRPC envelope of 64 MiB", "grpc", () => post(createPath, { "content-type": "application/grpc", te: "trailers" }, envelope(new Uint8Array(0), 0, big), big)],
    ["gRPC-Web envelope of 64 MiB", "grpc-web", () => post(createPath, { "content-type": "application/grpc-web+proto" }, envelope(new Uint8Array(0), 0, big), big)],
  ];
  for (const [what, protocol, send] of cases) {
    const answer = await send();
    expectDetail(t, errorOf(protocol, answer), Code.ResourceExhausted, "payload_too_large", what);
    t.ok(answer.sent < 16 * mb, `${what}: the server took ${(answer.sent / mb).toFixed(1)} MiB of 64 MiB`);
    const grown = process.memoryUsage().rss - rssBefore;
    t.ok(grown < 32 * mb, `${what}: the process grew by ${(grown / mb).toFixed(1)} MiB`);
  }
  // A message just under the limit still reaches the service (and its credential check).
  const under = toBinary(GetPaymentIntentRequestSchema, create(GetPaymentIntentRequestSchema, { merchant: a.merchant, publicId: "x".repeat(limit - 1024) }));
  const answer = await unary("grpc", getPath, "proto", under);
  expectDetail(t, errorOf("grpc", answer), Code.Unauthenticated, "unauthenticated", "a message under the limit");
});

t.test("bytes that are not the method's message are invalid_argument with a documented code", async (t) => {
  const notProto = Uint8Array.from([0x0f, 0x01, 0x02]); // field 1 with wire type 7, which does not exist
  const cutShort = Uint8Array.from([0x0a, 0x20, 0x61]); // a 32-byte string with 1 byte of it
  for (const protocol of ["connect", "grpc", "grpc-web"] as const) {
    for (const [what, bytes] of [
      ["wire type 7", notProto],
      ["truncated field", cutShort],
    ] as const) {
      for (const headers of [{}, auth]) {
        const label = `${protocol} proto, ${what}${headers === auth ? ", with a key" : ""}`;
        expectDetail(t, errorOf(protocol, await unary(protocol, getPath, "proto", bytes, headers)), Code.InvalidArgument, "validation_failed", label);
      }
    }
    for (const [what, text] of [
      ["not JSON", "\u0000{merchant"],
      ["a JSON array", "[1,2]"],
      ["invalid UTF-8", Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d])],
    ] as const) {
      const label = `${protocol} JSON, ${what}`;
      expectDetail(t, errorOf(protocol, await unary(protocol, getPath, "json", Buffer.from(text), auth)), Code.InvalidArgument, "invalid_json", label);
    }
  }
  // Framing the message wrongly is the request's fault too.
  const grpcHeaders = { "content-type": "application/grpc", te: "trailers" };
  const framings: [string, Buffer][] = [
    ["no message", Buffer.alloc(0)],
    ["an envelope cut short", envelope(Uint8Array.from([0x0a]), 0, 10)],
    ["two messages", Buffer.concat([envelope(new Uint8Array(0)), envelope(new Uint8Array(0))])],
    ["a compressed flag without grpc-encoding", envelope(Uint8Array.from([0x1f, 0x8b]), 1)],
  ];
  for (const [what, body] of framings) {
    expectDetail(t, errorOf("grpc", await post(getPath, { ...grpcHeaders, ...auth }, body)), Code.InvalidArgument, "validation_failed", `gRPC, ${what}`);
  }
});

t.test("JSON with a field the message does not define is refused, as REST refuses it", async (t) => {
  const known = { merchant: a.merchant, public_id: "pi_unknown" };
  for (const protocol of ["connect", "grpc", "grpc-web"] as const) {
    const plain = await unary(protocol, getPath, "json", Buffer.from(JSON.stringify(known)), auth);
    expectDetail(t, errorOf(protocol, plain), Code.NotFound, "not_found", `${protocol}: known fields reach the service`);
    const extra = await unary(protocol, getPath, "json", Buffer.from(JSON.stringify({ ...known, refund_to: "me" })), auth);
    expectDetail(t, errorOf(protocol, extra), Code.InvalidArgument, "validation_failed", `${protocol}: an unknown field`);
    const wrongType = await unary(protocol, getPath, "json", Buffer.from(JSON.stringify({ ...known, public_id: 7 })), auth);
    expectDetail(t, errorOf(protocol, wrongType), Code.InvalidArgument, "validation_failed", `${protocol}: a number for a string`);
  }
});

t.test("an error quoting a huge input keeps its message short and its trailers sendable", async (t) => {
  // The second has a surrogate pair wherever the cut falls, whatever the message quotes before it.
  const ids = [`pi_${"x".repeat(64 * 1024)}`, `pi_${"x😀".repeat(16 * 1024)}`];
  const transports = {
    grpc: createGrpcTransport({ baseUrl: rpcUrl }),
    "grpc-web": createGrpcWebTransport({ baseUrl: rpcUrl, httpVersion: "2" }),
    connect: createConnectTransport({ baseUrl: rpcUrl, httpVersion: "2" }),
  };
  for (const [[name, transport], publicId] of Object.entries(transports).flatMap((e) => ids.map((id) => [e, id] as const))) {
    const client = createClient(IntentService, transport);
    const err = await client.getPaymentIntent({ merchant: a.merchant, publicId }, { headers: auth }).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    t.ok(err && [Code.NotFound, Code.InvalidArgument].includes(err.code), `${name}: ${err?.code === undefined ? "no error" : Code[err.code]}`);
    t.ok(err?.findDetails(ErrorDetailSchema)[0]?.code, `${name}: with an ErrorDetail`);
    t.ok((err?.rawMessage.length ?? Infinity) <= 1000, `${name}: message of ${err?.rawMessage.length} characters`);
  }
  // The server still answers.
  const client = createClient(IntentService, transports.grpc);
  const list = await client.listPaymentIntents({ merchant: a.merchant, limit: 1 }, { headers: auth });
  t.same(list.data, []);
});

t.test("a connection left half open after a refusal is closed once idle", async (t) => {
  const idle = await startRpcServer(() => undefined, [], "127.0.0.1", 0, { bodyLimitBytes: limit, idleTimeoutMs: 300 });
  t.teardown(() => idle.close());
  const session = http2.connect(`http://127.0.0.1:${idle.port}`);
  session.on("error", () => undefined);
  const closed = new Promise<void>((resolve) => session.once("close", () => resolve()));
  const req = session.request({ ":method": "POST", ":path": createPath, "content-type": "application/proto" });
  req.on("error", () => undefined);
  const answered = new Promise<number>((resolve) => req.once("response", (h) => resolve(Number(h[":status"]))));
  req.write(Buffer.alloc(1024)); // and never end the body
  t.equal(await answered, 404, "the unknown method is answered before the body ends");
  const outcome = await Promise.race([closed.then(() => "closed"), sleep(10_000).then(() => "still open")]);
  t.equal(outcome, "closed", "the server closes the idle connection");
  session.destroy();
});
