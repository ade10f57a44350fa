// Fuzzing the rpc port: every method of every service, random bytes and random JSON as gRPC
// (binary framing, framed and not), gRPC-Web and Connect unary (JSON and proto), with and without
// a valid credential. Every answer is a success or a clean error (a code other than Internal or
// Unknown, with a payments.v1.ErrorDetail), the server stays up, and nothing is created.
import http2 from "node:http2";
import type { DescMethod } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { errorFromJsonBytes } from "@connectrpc/connect/protocol-connect";
import { findTrailerError } from "@connectrpc/connect/protocol-grpc";
import { trailerFlag, trailerParse } from "@connectrpc/connect/protocol-grpc-web";
import fc from "fast-check";
import pg from "pg";
import t from "tap";
import { ErrorDetailSchema } from "../../gen/payments/v1/options_pb.ts";
import { IntentService } from "../../gen/payments/v1/payment_intents_pb.ts";
import { services } from "../../services/app/routes.ts";
import { errorCodes } from "../../services/platform/errors.ts";
import { merchantWithKey, startTestApp } from "../helpers/harness.ts";

const { app, rpcUrl, databaseUrl } = await startTestApp(t, {}, ["rpc"]);
const a = await merchantWithKey(app);
const methods: DescMethod[] = services.flatMap((s) => s.methods);
const runs = Number(process.env.RPC_FUZZ_RUNS ?? 30);

type Protocol = "connect" | "grpc" | "grpc-web";

interface Answer {
  status: number;
  headers: Headers;
  trailers: Headers;
  body: Buffer;
}

let session: http2.ClientHttp2Session | undefined;
t.teardown(() => session?.destroy());

function toHeaders(h: http2.IncomingHttpHeaders): Headers {
  const out = new Headers();
  for (const [k, v] of Object.entries(h)) if (!k.startsWith(":") && v !== undefined) out.set(k, Array.isArray(v) ? v.join(", ") : String(v));
  return out;
}

/** One POST on a shared h2c session, given up on after 10 s. */
function post(path: string, headers: Record<string, string>, body: Uint8Array): Promise<Answer> {
  if (!session || session.closed || session.destroyed) {
    session = http2.connect(rpcUrl);
    session.on("error", () => undefined);
  }
  const req = session.request({ ":method": "POST", ":path": path, ...headers });
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let status = 0;
    let head = new Headers();
    let trailers = new Headers();
    const deadline = setTimeout(() => {
      req.close(http2.constants.NGHTTP2_CANCEL);
      reject(new Error(`${path}: no answer within 10 s`));
    }, 10_000);
    req.on("response", (h) => {
      status = Number(h[":status"]);
      head = toHeaders(h);
    });
    req.on("trailers", (h) => (trailers = toHeaders(h)));
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("error", (err) => {
      clearTimeout(deadline);
      reject(err);
    });
    req.on("end", () => {
      clearTimeout(deadline);
      resolve({ status, headers: head, trailers, body: Buffer.concat(chunks) });
    });
    req.end(body);
  });
}

function envelope(payload: Uint8Array): Buffer {
  const head = Buffer.alloc(5);
  head.writeUInt32BE(payload.length, 1);
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

const variants: { name: string; protocol: Protocol; contentType: string; frame: (b: Uint8Array) => Uint8Array }[] = [
  { name: "gRPC", protocol: "grpc", contentType: "application/grpc", frame: envelope },
  { name: "gRPC, unframed bytes", protocol: "grpc", contentType: "application/grpc", frame: (b) => b },
  { name: "gRPC-Web", protocol: "grpc-web", contentType: "application/grpc-web+proto", frame: envelope },
  { name: "Connect proto", protocol: "connect", contentType: "application/proto", frame: (b) => b },
  { name: "Connect JSON", protocol: "connect", contentType: "application/json", frame: (b) => b },
];

/** What a client sees wrong in an answer, or undefined when it is a success or a clean error. */
function defect(err: ConnectError | undefined): string | undefined {
  if (!err) return undefined;
  if (err.code === Code.Internal || err.code === Code.Unknown) return `${Code[err.code]}: ${err.rawMessage.slice(0, 200)}`;
  const detail = err.findDetails(ErrorDetailSchema)[0];
  if (!detail || !(detail.code in errorCodes)) return `${Code[err.code]} without a documented ErrorDetail: ${err.rawMessage.slice(0, 200)}`;
  if (err.rawMessage.length > 1000) return `a message of ${err.rawMessage.length} characters`;
  return undefined;
}

const utf8 = (s: string) => new TextEncoder().encode(s);

/** Bytes, JSON of any shape, and JSON objects that use the method's own field names with values of any type. */
function payloads(method: DescMethod): fc.Arbitrary<Uint8Array> {
  const names = method.input.fields.flatMap((f) => [f.name, f.jsonName]);
  const value = fc.oneof(fc.constant(a.merchant), fc.jsonValue({ maxDepth: 2 }));
  const shaped = fc.dictionary(names.length > 0 ? fc.constantFrom(...names) : fc.string(), value, { maxKeys: 4 });
  return fc.oneof(
    fc.uint8Array({ maxLength: 200 }),
    fc.json({ maxDepth: 3 }).map(utf8),
    shaped.map((o) => utf8(JSON.stringify(o))),
    fc.string({ unit: "binary", maxLength: 100 }).map(utf8),
  );
}

async function rowCounts(): Promise<Record<string, number>> {
  const c = new pg.Client({ connectionString: databaseUrl });
  await c.connect();
  try {
    const tables = await c.query<{ name: string }>(`select table_name as name from information_schema.tables where table_schema = 'public' and table_type = 'BASE TABLE' order by 1`);
    const counts: Record<string, number> = {};
    // The rate limiter's buckets count the calls themselves (every limited call takes a token), and a
    // key's last use records that it authenticated one: neither is anything the calls created.
    for (const { name } of tables.rows.filter((r) => r.name !== "rate_limit_buckets" && r.name !== "api_key_last_uses")) counts[name] = Number((await c.query(`select count(*)::int as n from "${name}"`)).rows[0].n);
    return counts;
  } finally {
    await c.end();
  }
}

t.test("every method answers random input with a success or a clean, documented error", async (t) => {
  const before = await rowCounts();
  let requests = 0;
  for (const method of methods) {
    const path = `/${method.parent.typeName}/${method.name}`;
    await fc.assert(
      fc.asyncProperty(payloads(method), fc.boolean(), async (payload, withKey) => {
        for (const v of variants) {
          const headers: Record<string, string> = { "content-type": v.contentType };
          if (v.protocol === "grpc") headers.te = "trailers";
          if (withKey) headers.authorization = `Bearer ${a.key}`;
          const answer = await post(path, headers, v.frame(payload));
          requests++;
          const wrong = defect(errorOf(v.protocol, answer));
          if (wrong) throw new Error(`${path} over ${v.name}${withKey ? " with a key" : ""}: ${wrong}`);
        }
      }),
      { numRuns: runs },
    );
  }
  t.ok(requests >= methods.length * runs * variants.length, `${requests} requests to ${methods.length} methods`);
  t.same(await rowCounts(), before, "nothing was created");
  // The server is still up and still answers a well-formed call.
  const client = createClient(IntentService, createGrpcTransport({ baseUrl: rpcUrl }));
  const list = await client.listPaymentIntents({ merchant: a.merchant, limit: 1 }, { headers: { authorization: `Bearer ${a.key}` } });
  t.same(list.data, []);
});
