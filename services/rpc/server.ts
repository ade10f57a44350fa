import http from "node:http";
import http2 from "node:http2";
import type net from "node:net";
import { Code, ConnectError, createContextKey, createContextValues, type ConnectRouter, type Interceptor } from "@connectrpc/connect";
import {
  compressedFlag,
  createAsyncIterable,
  pipe,
  readAllBytes,
  transformJoinEnvelopes,
  transformSplitEnvelope,
  type Compression,
  type EnvelopedMessage,
  type UniversalHandler,
  type UniversalServerRequest,
  type UniversalServerResponse,
} from "@connectrpc/connect/protocol";
import { codeToHttpStatus, errorFromJsonBytes, errorToJsonBytes } from "@connectrpc/connect/protocol-connect";
import { findTrailerError, setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import { trailerFlag, trailerParse, trailerSerialize } from "@connectrpc/connect/protocol-grpc-web";
import { compressionBrotli, compressionGzip, connectNodeAdapter } from "@connectrpc/connect-node";
import type { DescMethod } from "@bufbuild/protobuf";
import { ErrorDetailSchema } from "../../gen/payments/v1/options_pb.ts";
import { apiError, describeError, errorCodes } from "../platform/errors.ts";
import { newId } from "../platform/ids.ts";
import { repeatedKey } from "../platform/json-keys.ts";
import { clientAddressKey, type ClientAddresses } from "../platform/client-address.ts";
import { listen } from "../platform/listen.ts";
import { addReflection, reflectionServices, type ReflectionGate } from "./reflection.ts";

export interface Listening {
  port: number;
  close(): Promise<void>;
}

export interface RpcServerOptions {
  /** The largest request message accepted (BODY_LIMIT_BYTES, as for REST). */
  bodyLimitBytes: number;
  /** A connection with no traffic for this long is closed (default 60 s). */
  idleTimeoutMs?: number;
  /** Serves gRPC server reflection (v1 and v1alpha), answering while the gate allows. Unset: not served. */
  reflection?: ReflectionGate;
  /** Who a call comes from, for the routes' per-client limits. Unset: the socket's peer. */
  clientAddresses?: ClientAddresses;
}

/** Error messages can quote input (an id, a value); HTTP/2 peers refuse header blocks past ~16-64 KB. */
export const maxErrorMessageLength = 1000;

const compressions: Compression[] = [compressionGzip, compressionBrotli];

/** How long close() lets in-flight calls finish before it drops the connections left. */
const closeGraceMs = 10_000;

/** What every HTTP/2 client sends first (RFC 9113 3.4); no HTTP/1.x request line starts with it. */
const h2Preface = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");

/**
 * The rpc role: gRPC, gRPC-Web and Connect, over h2c and HTTP/1.1 on the same port. Browsers and
 * plain curl speak HTTP/1.1 to an http:// URL, gRPC clients HTTP/2 with prior knowledge; each
 * connection is told apart by its first bytes.
 */
export async function startRpcServer(
  routes: (router: ConnectRouter) => void,
  interceptors: Interceptor[],
  host: string,
  port: number,
  options: RpcServerOptions,
): Promise<Listening> {
  const limit = options.bodyLimitBytes;
  const handler = connectNodeAdapter({
    routes: (router) => {
      routes(router);
      if (options.reflection) addReflection(router, [...new Set(router.handlers.map((h) => h.service))], options.reflection, [boundary]);
      // connectNodeAdapter builds its path table from this array after routes() returns.
      // Reflection is gRPC's own protocol, not the payments API: its errors are plain statuses.
      router.handlers.forEach((h, i) => {
        if (!reflectionServices.includes(h.service)) router.handlers[i] = withDocumentedErrors(h, limit);
      });
    },
    interceptors: [boundary, ...interceptors],
    contextValues: (req) => {
      const forwarded = req.headers["x-forwarded-for"];
      const peer = req.socket.remoteAddress;
      const address = options.clientAddresses ? options.clientAddresses.of(peer, Array.isArray(forwarded) ? forwarded.join(",") : forwarded) : (peer ?? "unknown");
      return createContextValues().set(clientAddressKey, address);
    },
    acceptCompression: compressions,
    // Connect checks the declared size (Content-Length, or a gRPC envelope's length prefix) before
    // buffering, and stops reading once a body without one passes the limit.
    readMaxBytes: limit,
    // REST refuses unknown fields; so do Connect and gRPC JSON.
    // textDecoder is missing from the adapter's type, yet Connect's JSON serialization reads it
    // (createJsonSerialization, @connectrpc/connect 2.1.2); the tests of invalid_json catch a change.
    jsonOptions: { ignoreUnknownFields: false, textDecoder: jsonBodyDecoder } as { ignoreUnknownFields: boolean },
  });
  const idleMs = options.idleTimeoutMs ?? 60_000;
  const h2 = http2.createServer(handler);
  // A client that stops mid-upload after a refusal leaves its stream half open, and the session
  // would never close; an idle connection of a well-behaved client is simply made again.
  h2.setTimeout(idleMs);
  let closing = false;
  const sessions = new Set<http2.Http2Session>();
  h2.on("session", (session) => {
    sessions.add(session);
    session.once("close", () => sessions.delete(session));
    // Its preface came during close(): it gets the GOAWAY the others got.
    if (closing) session.close();
  });
  // The HTTP/1.1 server owns the listening socket, so Node's own HTTP/1.1 connection tracking
  // (idle keep-alive, header and request timeouts, closeIdleConnections) holds for its share.
  const h1 = http.createServer(handler);
  h1.setTimeout(idleMs);
  const h1Connection = h1.listeners("connection");
  if (h1Connection.length !== 1) throw new Error("node:http changed: expected one connection listener on a new server");
  h1.removeAllListeners("connection");
  const undecided = new Set<net.Socket>();
  h1.on("connection", (socket: net.Socket) => {
    undecided.add(socket);
    sniff(socket, idleMs, (isH2) => {
      undecided.delete(socket);
      // The HTTP/2 session reads the bytes put back by itself; the HTTP/1.1 parser gets them once
      // the socket flows again.
      if (isH2) h2.emit("connection", socket);
      else {
        h1Connection[0]!.call(h1, socket);
        socket.resume();
      }
    });
  });
  const server = await listen(h1, host, port);
  return {
    port: server.port,
    close: () => {
      closing = true;
      // Nothing sent yet, so nothing in flight.
      for (const socket of undecided) socket.destroy();
      // GOAWAY: in-flight calls finish, new ones go elsewhere. HTTP/1.1: listen() answers what it has
      // received with Connection: close and drops idle keep-alive connections.
      for (const session of sessions) session.close();
      // A session whose client stopped mid-body after its answer (a refused upload, say) never
      // closes by itself: it stops reading its socket and so never sees the client leave.
      const grace = setTimeout(() => {
        for (const session of sessions) session.destroy();
        h1.closeAllConnections();
      }, closeGraceMs);
      return server.close().finally(() => clearTimeout(grace));
    },
  };
}

/**
 * Reads a connection's first bytes until they are, or cannot be, the HTTP/2 preface, then puts
 * them back for whichever server takes it. A connection that sends nothing is closed once idle.
 */
function sniff(socket: net.Socket, idleMs: number, decide: (isH2: boolean) => void): void {
  let head = Buffer.alloc(0);
  const onTimeout = () => socket.destroy();
  // A reset, or an end, before the decision: nothing to hand over.
  const onError = () => socket.destroy();
  const onData = (chunk: Buffer) => {
    head = Buffer.concat([head, chunk]);
    const n = Math.min(head.length, h2Preface.length);
    const isH2 = head.subarray(0, n).equals(h2Preface.subarray(0, n));
    if (isH2 && n < h2Preface.length) return;
    socket.off("data", onData);
    socket.off("timeout", onTimeout);
    socket.off("error", onError);
    socket.off("end", onError);
    socket.setTimeout(0);
    socket.pause();
    socket.unshift(head);
    decide(isH2);
  };
  socket.setTimeout(idleMs);
  socket.on("timeout", onTimeout);
  socket.on("error", onError);
  socket.on("end", onError);
  socket.on("data", onData);
}

/** Set once a call gets past decoding: errors raised before it come from Connect's protocol layer. */
const decodedKey = createContextKey(false);

/** The outermost interceptor: marks the call decoded, and bounds the message of whatever it throws. */
const boundary: Interceptor = (next) => async (req) => {
  req.contextValues.set(decodedKey, true);
  try {
    return await next(req);
  } catch (err) {
    throw bounded(ConnectError.from(err, Code.Internal));
  }
};

function bounded(err: ConnectError): ConnectError {
  if (err.rawMessage.length <= maxErrorMessageLength) return err;
  // Not between the halves of a surrogate pair: gRPC percent-encodes the message, and a lone one throws.
  const cut = err.rawMessage.slice(0, maxErrorMessageLength - 1).replace(/[\uD800-\uDBFF]$/, "");
  return copyOf(err, `${cut}…`);
}

function copyOf(err: ConnectError, message: string, withMetadata = true): ConnectError {
  const copy = new ConnectError(message, err.code, withMetadata ? err.metadata : undefined, undefined, err.cause);
  copy.details = err.details;
  return copy;
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * Connect turns a JSON body into text with this decoder before it parses it, ahead of any
 * interceptor; a ConnectError thrown here reaches the client as it is. So what REST calls
 * invalid_json is refused here with the same code; what is JSON but not the message (unknown
 * field, wrong type) is left to Connect and becomes validation_failed in withDocumentedErrors.
 */
const jsonBodyDecoder = {
  decode(bytes?: Uint8Array): string {
    let value: unknown;
    let text: string;
    try {
      text = utf8.decode(bytes);
      value = JSON.parse(text);
    } catch {
      throw apiError("invalid_json", "The request body is not valid UTF-8 JSON.");
    }
    if (typeof value !== "object" || value === null || Array.isArray(value)) {
      throw apiError("invalid_json", "The request body must be a JSON object.");
    }
    const repeated = repeatedKey(text);
    if (repeated !== undefined) throw apiError("invalid_json", `The request body gives the key "${repeated}" more than once.`, repeated);
    return text;
  },
};

function hasErrorDetail(err: ConnectError): boolean {
  const detail = err.findDetails(ErrorDetailSchema)[0];
  return detail !== undefined && detail.code in errorCodes;
}

/**
 * The error a client should see in place of `err`, or undefined when `err` is already one.
 * Errors raised before the call was decoded (size, framing, encoding) carry no ErrorDetail and
 * may quote the parser: they get a documented code and a fixed message.
 */
function documented(err: ConnectError, decoded: boolean, method: DescMethod, json: boolean, limit: number): ConnectError | undefined {
  let out: ConnectError;
  if (hasErrorDetail(err)) {
    if (err.rawMessage.length <= maxErrorMessageLength && err.metadata.has("x-request-id")) return undefined;
    const cut = bounded(err);
    out = copyOf(cut, cut.rawMessage);
  } else if (!decoded && err.code === Code.ResourceExhausted) {
    out = apiError("payload_too_large", `The request message exceeds ${limit} bytes.`);
  } else if (!decoded && err.code !== Code.Canceled && err.code !== Code.DeadlineExceeded && err.code !== Code.Aborted) {
    out = json
      ? apiError("validation_failed", `The request is not a ${method.input.typeName} message: an unknown field, or a value of the wrong type.`)
      : apiError("validation_failed", `The request is not one well-formed ${method.input.typeName} message.`);
  } else {
    const view = describeError(err);
    out = apiError(view.code, view.message, view.param);
  }
  const requestId = err.metadata.get("x-request-id");
  out.metadata.set("x-request-id", requestId ?? newId("req"));
  return out;
}

/**
 * Wraps one method's handler so that every error it answers with, in each protocol's own
 * framing, carries a payments.v1.ErrorDetail and a message safe to show.
 */
function withDocumentedErrors(inner: UniversalHandler, limit: number): UniversalHandler {
  const method = inner.method;
  async function handle(req: UniversalServerRequest): Promise<UniversalServerResponse> {
    const values = (req.contextValues ??= createContextValues());
    const res = await inner(req);
    const contentType = res.header?.get("content-type") ?? "";
    const json = req.method === "GET" ? new URL(req.url).searchParams.get("encoding") === "json" : /json/i.test(req.header.get("content-type") ?? "");
    const fix = (err: ConnectError) => documented(err, values.get(decodedKey), method, json, limit);
    if (/^application\/grpc-web/i.test(contentType)) return { ...res, body: res.body && fixGrpcWebTrailer(res.body, res.header, fix) };
    if (/^application\/grpc/i.test(contentType) && res.trailer) return { ...res, body: fixGrpcTrailer(res.body, res.trailer, fix) };
    if (res.status !== 200 && /^application\/json/i.test(contentType) && res.body) return fixConnectError(res, fix);
    return res;
  }
  return Object.assign(handle, inner);
}

type Fix = (err: ConnectError) => ConnectError | undefined;

const statusHeaders = ["grpc-status", "grpc-message", "grpc-status-details-bin"];

/** gRPC: the status travels in HTTP trailers, final once the body has been sent. */
async function* fixGrpcTrailer(body: AsyncIterable<Uint8Array> | undefined, trailer: Headers, fix: Fix): AsyncIterable<Uint8Array> {
  if (body) yield* body;
  replaceStatus(trailer, fix);
}

function replaceStatus(trailer: Headers, fix: Fix): void {
  const err = findTrailerError(trailer);
  const fixed = err && fix(err);
  if (!fixed) return;
  for (const name of statusHeaders) trailer.delete(name);
  fixed.metadata.forEach((value, key) => {
    if (!trailer.has(key) && !statusHeaders.includes(key)) trailer.set(key, value);
  });
  // The metadata is in place; setTrailerStatus would append it a second time.
  setTrailerStatus(trailer, copyOf(fixed, fixed.rawMessage, false));
}

/** gRPC-Web: the status travels in the body's last envelope (flag 0x80). */
function fixGrpcWebTrailer(body: AsyncIterable<Uint8Array>, header: Headers | undefined, fix: Fix): AsyncIterable<Uint8Array> {
  const encoding = header?.get("grpc-encoding");
  const compression = compressions.find((c) => c.name === encoding);
  return pipe(
    body,
    transformSplitEnvelope(0xffffffff),
    async function* (envelopes: AsyncIterable<EnvelopedMessage>) {
      for await (const env of envelopes) {
        if ((env.flags & trailerFlag) !== trailerFlag) {
          yield env;
          continue;
        }
        const data = (env.flags & compressedFlag) === compressedFlag && compression ? await compression.decompress(env.data, 0xffffffff) : env.data;
        const trailer = trailerParse(data);
        replaceStatus(trailer, fix);
        yield { flags: trailerFlag, data: trailerSerialize(trailer) };
      }
    },
    transformJoinEnvelopes(),
  );
}

/** Connect unary: the error is the JSON body of a non-200 answer. */
async function fixConnectError(res: UniversalServerResponse, fix: Fix): Promise<UniversalServerResponse> {
  const header = new Headers(res.header);
  const sent = await readAllBytes(res.body as AsyncIterable<Uint8Array>, 0xffffffff);
  const compression = compressions.find((c) => c.name === header.get("content-encoding"));
  const bytes = compression ? await compression.decompress(sent, 0xffffffff) : sent;
  const fixed = fix(errorFromJsonBytes(bytes, header, new ConnectError("unreadable error", Code.Internal)));
  if (!fixed) return { ...res, body: createAsyncIterable([sent]) };
  const body = errorToJsonBytes(fixed, undefined);
  header.delete("content-encoding");
  header.set("content-length", String(body.byteLength));
  fixed.metadata.forEach((value, key) => {
    if (!header.has(key)) header.set(key, value);
  });
  return { ...res, status: codeToHttpStatus(fixed.code), header, body: createAsyncIterable([body]) };
}
