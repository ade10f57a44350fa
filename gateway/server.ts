import http from "node:http";
import type { Duplex } from "node:stream";
import type { DescMessage, DescService, JsonValue } from "@bufbuild/protobuf";
import { ConnectError, createContextValues, type Transport } from "@connectrpc/connect";
import { apiError, describeError, type ApiErrorView } from "../services/platform/errors.ts";
import { newId } from "../services/platform/ids.ts";
import { repeatedKey } from "../services/platform/json-keys.ts";
import type { Logger } from "../services/platform/logger.ts";
import { decodeRequest, encodeResponse } from "../services/platform/api-json.ts";
import { writeEach } from "../services/platform/response-stream.ts";
import { Credential } from "../gen/payments/v1/options_pb.ts";
import { clientAddressKey, type ClientAddresses } from "../services/platform/client-address.ts";
import { canDefer, deferredRefusalHeader, encodeRefusal } from "../services/platform/deferred-refusal.ts";
import { buildRoutes, isCanonicalPath, matchRoute, type RestRoute } from "./routes.ts";

/** Request headers the gateway passes to the RPC server; everything else stays at the edge. */
const forwardedHeaders = ["authorization", "idempotency-key", "origin"] as const;
/** Response headers of the RPC server that a REST client sees. */
const returnedHeaders: Record<string, string> = {
  "idempotent-replayed": "Idempotent-Replayed",
  "access-control-allow-origin": "Access-Control-Allow-Origin",
};
/** What a browser on an allowed origin may send and read (CORS). */
const corsRequestHeaders = "Authorization, Content-Type, Idempotency-Key";
const corsExposedHeaders = "X-Request-Id, Idempotent-Replayed";

/** A request that took this long is logged at info level even when it succeeded. */
const slowRequestSeconds = 1;

/** Deadline of one RPC from the gateway (a stream has none: it lasts until its client leaves). */
const rpcDeadlineMs = 30_000;

export interface GatewayOptions {
  services: readonly DescService[];
  transport: Transport;
  logger: Logger;
  bodyLimitBytes: number;
  /**
   * How long an idle keep-alive connection stays open, as the Keep-Alive header announces it
   * (Node's own default is 5 s; Node closes 1 s after it, its keepAliveTimeoutBuffer). A client
   * that sends on a connection as the server closes it gets a reset, not an answer: at the default
   * a merchant's pooled connection, idle a moment too long, failed a create with ECONNRESET (the
   * merchant-path bench, about one run in six: a connection reused after 5 988 ms). A proxy in
   * front keeps its connections to us for its own idle time (often 60 s), which must be shorter
   * than this. Node's agent times its idle connections by the header, but a busy client's timer
   * fires late (the bench's did).
   */
  keepAliveTimeoutMs?: number;
  /** Whether a browser origin may call the routes that allow CORS (credential CREDENTIAL_SITE_GATEWAY): answers preflights. */
  corsOriginAllowed?: (origin: string, clientAddress: string) => Promise<boolean>;
  /** Who a request comes from (the socket's peer, or through trusted proxies X-Forwarded-For), for the routes' per-client limits. */
  clientAddresses: ClientAddresses;
  /** Pages served beside the API (not under /api/): the first whose handler takes the path answers it. */
  pages?: readonly PageHandler[];
  /**
   * Told of every request once it is answered (metrics): `route` is the matched route's template,
   * "page" for a page, "preflight" for a CORS preflight, "unmatched" otherwise: never the raw path.
   */
  observe?: (o: { route: string; method: string; status: number; seconds: number }) => void;
}

/** Serves a request outside the API, or returns false to leave it to the API routes; `clientAddress` as for the routes' limits. */
export type PageHandler = (req: http.IncomingMessage, res: http.ServerResponse, url: URL, clientAddress: string) => Promise<boolean>;

/** Routes a browser may call cross-origin: those of the Site Gateway credential. */
function allowsCors(route: RestRoute): boolean {
  return route.option.credential === Credential.SITE_GATEWAY;
}

class RequestError extends Error {
  readonly view: ApiErrorView;
  readonly headers: Record<string, string>;
  constructor(view: ApiErrorView, headers: Record<string, string> = {}) {
    super(view.message);
    this.view = view;
    this.headers = headers;
  }
}

function fail(err: ConnectError, headers?: Record<string, string>): never {
  throw new RequestError(describeError(err), headers);
}

function send(res: http.ServerResponse, status: number, body: JsonValue, headers: Record<string, string> = {}): void {
  const bytes = Buffer.from(JSON.stringify(body));
  res.writeHead(status, {
    ...headers,
    "Content-Type": "application/json; charset=utf-8",
    "Content-Length": bytes.length,
    "Cache-Control": "no-store",
  });
  res.end(bytes);
}

/**
 * A server stream as Server-Sent Events: each message one `data:` line of its JSON, written as the
 * client reads (a slow reader holds back only its own stream). A failure after the first byte
 * cannot change the status: it is one `event: error` with the error envelope, then the end.
 */
async function sendEvents(res: http.ServerResponse, output: DescMessage, messages: AsyncIterable<unknown>, headers: Record<string, string>, logger: Logger, requestId: string, opened: () => void): Promise<void> {
  // The status waits for the first message: a refusal before it (a handler's checks) is an error
  // answered as any other. Streaming handlers send one at once when they accept the call.
  const iterator = messages[Symbol.asyncIterator]();
  const first = await iterator.next();
  res.writeHead(200, { ...headers, "Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-store", "X-Accel-Buffering": "no" });
  opened();
  try {
    await writeEach(res, first, iterator, (message) => `data: ${JSON.stringify(encodeResponse(output, message as never))}\n\n`);
  } catch (err) {
    const view = describeError(err);
    // The client going away ends its stream with a cancel: nothing to tell or log.
    if (!res.destroyed && !res.writableEnded) {
      if (view.code === "internal_error") logger.error({ err, requestId }, "stream failed");
      res.write(`event: error\ndata: ${JSON.stringify({ error: { code: view.code, message: view.message, request_id: requestId } })}\n\n`);
    }
  }
  if (!res.writableEnded) res.end();
}

/**
 * A server stream as a file (route option media_type, e.g. text/csv): the body is each message's
 * `chunk`, written as the client reads (the next message is asked for only once the last one is
 * taken, so the server holds one message at a time however large the file). As with events, the
 * status waits for the first message, so a refusal before it is the error envelope. A failure
 * after it cannot change the status: the response is aborted (its chunked encoding never ends),
 * so no client takes a cut-off file for a whole one.
 */
async function sendFile(res: http.ServerResponse, route: RestRoute, messages: AsyncIterable<unknown>, headers: Record<string, string>, logger: Logger, requestId: string, opened: () => void): Promise<void> {
  const iterator = messages[Symbol.asyncIterator]();
  const first = await iterator.next();
  res.writeHead(200, {
    ...headers,
    "Content-Type": `${route.option.mediaType}; charset=utf-8`,
    "Content-Disposition": `attachment; filename="${route.option.fileName}"`,
    "Cache-Control": "no-store",
    "X-Accel-Buffering": "no",
  });
  opened();
  try {
    await writeEach(res, first, iterator, (message) => (message as { chunk: string }).chunk);
  } catch (err) {
    if (!res.destroyed) {
      if (describeError(err).code === "internal_error") logger.error({ err, requestId }, "file stream failed");
      res.destroy();
    }
    return;
  }
  if (!res.writableEnded && !res.destroyed) res.end();
}

async function readBody(req: http.IncomingMessage, limit: number): Promise<Buffer> {
  const declared = Number(req.headers["content-length"] ?? "0");
  if (declared > limit) fail(apiError("payload_too_large", `The request body exceeds ${limit} bytes.`), { Connection: "close" });
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) fail(apiError("payload_too_large", `The request body exceeds ${limit} bytes.`), { Connection: "close" });
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

function parseJsonObject(bytes: Buffer): Record<string, JsonValue> {
  let value: unknown;
  let text = "";
  try {
    text = utf8.decode(bytes);
    value = JSON.parse(text);
  } catch {
    fail(apiError("invalid_json", "The request body is not valid UTF-8 JSON."));
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    fail(apiError("invalid_json", "The request body must be a JSON object."));
  }
  const repeated = repeatedKey(text);
  if (repeated !== undefined) fail(apiError("invalid_json", `The request body gives the key "${repeated}" more than once.`, repeated));
  return value as Record<string, JsonValue>;
}

const token = "[!#$%&'*+\\-.^_`|~0-9A-Za-z]+";
const mediaType = new RegExp(`^(${token}/${token})[ \t]*`);
/** RFC 9110 8.3.1: `; name=value`, the value a token or a quoted-string; empty parameters allowed. */
const mediaParameter = new RegExp(`;[ \t]*(?:(${token})=(${token}|"(?:[^"\\\\]|\\\\[\\s\\S])*"))?[ \t]*`, "y");

/** application/json, with no parameter but charset=utf-8 (names and values case-insensitive, quoted or not). */
function isJson(contentType: string | undefined): boolean {
  const type = contentType === undefined ? null : mediaType.exec(contentType);
  if (!contentType || !type || type[1]?.toLowerCase() !== "application/json") return false;
  let charset: string | undefined;
  mediaParameter.lastIndex = type[0].length;
  while (mediaParameter.lastIndex < contentType.length) {
    const param = mediaParameter.exec(contentType);
    if (!param) return false;
    const [, name, value = ""] = param;
    if (name === undefined) continue;
    if (name.toLowerCase() !== "charset" || charset !== undefined) return false;
    charset = value.startsWith('"') ? value.slice(1, -1).replace(/\\([\s\S])/g, "$1") : value;
  }
  return charset === undefined || charset.toLowerCase() === "utf-8";
}

/** A compressed body would be parsed as JSON bytes it is not: only identity is taken. */
function hasContentEncoding(req: http.IncomingMessage): boolean {
  const encoding = req.headers["content-encoding"];
  return encoding !== undefined && encoding.split(",").some((e) => e.trim() !== "" && e.trim().toLowerCase() !== "identity");
}

function parseQuery(url: URL): Record<string, JsonValue> {
  const query: Record<string, JsonValue> = {};
  for (const [key, value] of url.searchParams) {
    if (key in query) fail(apiError("validation_failed", `Query parameter "${key}" is given more than once.`, key));
    query[key] = value;
  }
  return query;
}

/** The REST gateway: one generic handler, its route table built from the proto options. */
export function createGateway(options: GatewayOptions): http.Server {
  const routes = buildRoutes(options.services);
  const { logger, transport } = options;
  /** Requests whose refusal must close the connection (a body left unread), deferred to the RPC server. */
  const closeAfter = new WeakSet<http.IncomingMessage>();

  const clientAddressOf = (req: http.IncomingMessage) => options.clientAddresses.of(req.socket.remoteAddress, req.headersDistinct["x-forwarded-for"]?.join(","));

  /** CORS preflight: only on routes that allow CORS, and only for an origin some site credential allows. */
  async function preflight(req: http.IncomingMessage, res: http.ServerResponse, path: string): Promise<boolean> {
    const cors = routes.filter((r) => allowsCors(r) && r.pattern.test(path));
    if (cors.length === 0) return false;
    const origin = req.headers.origin;
    const allowed = typeof origin === "string" && options.corsOriginAllowed !== undefined && (await options.corsOriginAllowed(origin, clientAddressOf(req)));
    const headers: Record<string, string> = { Vary: "Origin", "Content-Length": "0" };
    if (allowed) {
      headers["Access-Control-Allow-Origin"] = origin;
      headers["Access-Control-Allow-Methods"] = [...new Set(cors.map((r) => r.httpMethod))].sort().join(", ");
      headers["Access-Control-Allow-Headers"] = corsRequestHeaders;
      headers["Access-Control-Max-Age"] = "600";
    }
    res.writeHead(204, headers);
    res.end();
    return true;
  }

  /** The request message of a REST call, from its path, query and body. */
  async function decode(route: RestRoute, req: http.IncomingMessage, url: URL, params: Record<string, string>) {
    let input: Record<string, JsonValue> = {};
    if (hasContentEncoding(req)) {
      fail(apiError("unsupported_media_type", "Content-Encoding is not supported: send the body uncompressed (identity)."), { Connection: "close" });
    }
    if (route.httpMethod === "GET") {
      input = parseQuery(url);
    } else {
      if (url.search !== "") fail(apiError("validation_failed", "This route takes no query parameters.", [...url.searchParams.keys()][0]));
      const body = await readBody(req, options.bodyLimitBytes);
      if (route.takesBody || body.length > 0) {
        if (!isJson(req.headers["content-type"])) {
          fail(apiError("unsupported_media_type", "Content-Type must be application/json."));
        }
        // No body, or only JSON whitespace, is an empty object: the fields it lacks are named by the validators.
        input = parseJsonObject(/^[ \t\r\n]*$/.test(body.toString("latin1")) ? Buffer.from("{}") : body);
        if (!route.takesBody && Object.keys(input).length > 0) {
          fail(apiError("validation_failed", `Unknown field "${Object.keys(input)[0]}".`, Object.keys(input)[0]));
        }
      }
    }
    return decodeRequest(route.rpc.input, params, input, route.takesBody ? "body" : "query");
  }

  async function call(route: RestRoute, req: http.IncomingMessage, res: http.ServerResponse, url: URL, params: Record<string, string>, requestId: string) {
    const header = new Headers({ "x-request-id": requestId });
    let message;
    try {
      message = await decode(route, req, url, params);
    } catch (err) {
      // Authenticate, authorize, then validate: what was sent is refused by the RPC server, after
      // it has checked the caller, with an empty request in place of the unreadable one. Only a
      // body over the limit is refused first: reading it is already the cost the limit caps.
      const view = err instanceof RequestError ? err.view : describeError(err);
      if (!canDefer(view)) throw err;
      header.set(deferredRefusalHeader, encodeRefusal(view));
      message = decodeRequest(route.rpc.input, params, {}, "query");
      if (err instanceof RequestError && err.headers.Connection === "close") closeAfter.add(req);
    }
    for (const name of forwardedHeaders) {
      const value = req.headers[name];
      if (typeof value === "string") header.set(name, value);
    }
    const abort = new AbortController();
    req.once("close", () => {
      if (!req.complete) abort.abort();
    });
    // The client's address: in this process as a context value, to an rpc process as X-Forwarded-For.
    const address = clientAddressOf(req);
    header.set("x-forwarded-for", address);
    const values = createContextValues().set(clientAddressKey, address);
    if (route.rpc.methodKind === "server_streaming") {
      // A stream ends when its client leaves: the response's close, since a GET is complete at once.
      res.once("close", () => abort.abort());
      return { kind: "stream" as const, response: await transport.stream(route.rpc, abort.signal, undefined, header, (async function* () { yield message; })(), values) };
    }
    return { kind: "unary" as const, response: await transport.unary(route.rpc, abort.signal, rpcDeadlineMs, header, message, values) };
  }

  const handle = async (req: http.IncomingMessage, res: http.ServerResponse) => {
    const requestId = newId("req");
    res.setHeader("X-Request-Id", requestId);
    const started = performance.now();
    let status = 500;
    let code: string | undefined;
    let routeLabel = "unmatched";
    let openedAfter: number | undefined;
    try {
      // RFC 9112 3.2: a request carries one Host (HTTP/1.0 may omit it). Node's own check answers
      // without our envelope and lets two through, so the check is ours.
      const hosts = hostHeaders(req);
      if (hosts > 1 || (hosts === 0 && req.httpVersion !== "1.0")) fail(apiError("validation_failed", "The request must carry exactly one Host header.", "Host"));
      // Origin-form only ("/path?query"): an absolute-form target ("http://host/api/…") or "*" names no route of ours.
      const target = req.url ?? "";
      const rawPath = target.split("?", 1)[0] as string;
      if (!target.startsWith("/")) fail(apiError("route_not_found", "No such route."));
      // Never `new URL(target, base)`: it reads "//host/…" as another host and resolves dot segments.
      const url = URL.parse(`http://gateway${target}`);
      if (!url) fail(apiError("route_not_found", "No such route."));
      if (!url.pathname.startsWith("/api/")) {
        for (const page of options.pages ?? []) {
          if (await page(req, res, url, clientAddressOf(req))) {
            status = res.statusCode;
            routeLabel = "page";
            return;
          }
        }
      }
      // Only the exact spelling of a route answers: a path that would need normalizing could mean
      // one thing here and another to a proxy or cache in front.
      if (!isCanonicalPath(rawPath)) fail(apiError("route_not_found", "No such route: the path is not in canonical form."));
      if (req.method === "OPTIONS" && (await preflight(req, res, rawPath))) {
        status = 204;
        routeLabel = "preflight";
        return;
      }
      const match = matchRoute(routes, req.method === "HEAD" ? "GET" : (req.method ?? "GET"), rawPath);
      if (match.kind === "not_found") fail(apiError("route_not_found", `No route ${req.method} ${rawPath}.${notFoundHint(rawPath)}`));
      if (match.kind === "wrong_method") {
        fail(apiError("method_not_allowed", `${req.method} is not allowed on ${rawPath}.`), { Allow: match.allow.join(", ") });
      }
      routeLabel = match.route.template;
      // HEAD of a stream would hold a connection open to say nothing.
      if (req.method === "HEAD" && match.route.rpc.methodKind === "server_streaming") fail(apiError("method_not_allowed", `HEAD is not allowed on ${rawPath}: it is a stream.`), { Allow: "GET" });
      if (allowsCors(match.route)) res.setHeader("Vary", "Origin");
      // Node keeps the first of several Authorization headers; which credential is meant is anyone's guess.
      if ((req.headersDistinct.authorization?.length ?? 0) > 1) {
        fail(apiError("unauthenticated", "Send exactly one Authorization header."));
      }
      const answer = await call(match.route, req, res, url, match.params, requestId);
      const headers: Record<string, string> = {};
      for (const [from, to] of Object.entries(returnedHeaders)) {
        const value = answer.response.header.get(from);
        if (value !== null) headers[to] = value;
      }
      if (headers["Access-Control-Allow-Origin"]) headers["Access-Control-Expose-Headers"] = corsExposedHeaders;
      status = 200;
      if (answer.kind === "stream") {
        // A stream's latency is its time to open: its life is its client's, not the server's speed.
        const opened = () => (openedAfter = (performance.now() - started) / 1000);
        if (match.route.option.mediaType !== "") await sendFile(res, match.route, answer.response.message, headers, logger, requestId, opened);
        else await sendEvents(res, match.route.rpc.output, answer.response.message, headers, logger, requestId, opened);
        return;
      }
      send(res, status, encodeResponse(match.route.rpc.output, answer.response.message), headers);
    } catch (err) {
      const { view, headers } = err instanceof RequestError ? err : new RequestError(describeError(err), { ...corsOf(err), ...(closeAfter.has(req) ? { Connection: "close" } : {}) });
      status = view.status;
      code = view.code;
      if (view.code === "internal_error") logger.error({ err, requestId }, "request failed");
      const retryAfter = err instanceof ConnectError ? err.metadata.get("retry-after") : null;
      const retry: Record<string, string> = (view.status === 429 || view.status === 503) && !headers["Retry-After"] ? { "Retry-After": retryAfter ?? "1" } : {};
      const error: Record<string, JsonValue> = { code: view.code, message: view.message };
      if (view.param) error.param = view.param;
      error.request_id = requestId;
      if (!res.headersSent) send(res, view.status, { error }, { ...retry, ...headers });
      if (headers.Connection === "close") req.resume();
    } finally {
      const seconds = openedAfter ?? (performance.now() - started) / 1000;
      // Counts and latencies are in the metrics; the log keeps what someone would look for:
      // refused and failed requests, and slow ones. The rest only at LOG_LEVEL=debug.
      const level = status >= 400 || seconds >= slowRequestSeconds ? "info" : "debug";
      if (logger.isLevelEnabled(level)) {
        logger[level]({ requestId, method: req.method, path: req.url?.split("?")[0], status, code, ms: Math.round(seconds * 1000) }, "http request");
      }
      options.observe?.({ route: routeLabel, method: req.method ?? "", status, seconds });
    }
  };

  const server = http.createServer({ requireHostHeader: false, keepAliveTimeout: options.keepAliveTimeoutMs }, handle);
  // An Expect other than 100-continue may be ignored (RFC 9110 10.1.1); Node's default is a bare 417.
  server.on("checkExpectation", handle);
  // Requests Node's parser refuses never reach `handle`: answer them in the envelope too.
  server.on("clientError", (err: NodeJS.ErrnoException, socket: Duplex & { _httpMessage?: http.ServerResponse }) => {
    if (err.code === "ECONNRESET" || !socket.writable || socket.writableEnded || socket._httpMessage?.headersSent) {
      socket.destroy();
      return;
    }
    const [status, code, message] =
      err.code === "HPE_HEADER_OVERFLOW"
        ? ([431, "payload_too_large", "The request headers exceed 16 KiB."] as const)
        : err.code === "ERR_HTTP_REQUEST_TIMEOUT"
          ? ([408, "validation_failed", "The request did not arrive in time."] as const)
          : ([400, "validation_failed", "The request is not valid HTTP/1.1."] as const);
    refuse(socket, status, code, message, {}, logger, err.code);
  });
  // CONNECT (a tunnel) is nothing a REST API offers; Node would leave it unanswered.
  server.on("connect", (_req: http.IncomingMessage, socket: Duplex) => {
    refuse(socket, 405, "method_not_allowed", "CONNECT is not allowed.", { Allow: "" }, logger, "CONNECT");
  });
  return server;
}

function hostHeaders(req: http.IncomingMessage): number {
  let n = 0;
  for (let i = 0; i < req.rawHeaders.length; i += 2) if (req.rawHeaders[i]?.toLowerCase() === "host") n++;
  return n;
}

/** A whole HTTP/1.1 error response written to a socket the HTTP server has given up on, then the end of it. */
function refuse(socket: Duplex, status: number, code: string, message: string, headers: Record<string, string>, logger: Logger, reason: string | undefined): void {
  const requestId = newId("req");
  const body = JSON.stringify({ error: { code, message, request_id: requestId } });
  const lines = [
    `HTTP/1.1 ${status} ${http.STATUS_CODES[status] ?? "Error"}`,
    "Content-Type: application/json; charset=utf-8",
    `Content-Length: ${Buffer.byteLength(body)}`,
    "Cache-Control: no-store",
    `X-Request-Id: ${requestId}`,
    ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
    "Connection: close",
  ];
  socket.end(`${lines.join("\r\n")}\r\n\r\n${body}`);
  // What the client still sends is read and dropped, so that closing does not reset the connection
  // before the client has read the answer; a client that never stops sending is cut off.
  socket.resume();
  setTimeout(() => socket.destroy(), 5_000).unref();
  // Never the raw request: it may hold an Authorization header.
  logger.info({ requestId, status, code, reason }, "http request refused by the parser");
}

/** An error's CORS headers: a site credential's allowed origin may read its errors too. */
function corsOf(err: unknown): Record<string, string> {
  const origin = err instanceof ConnectError ? err.metadata.get("access-control-allow-origin") : null;
  return origin ? { "Access-Control-Allow-Origin": origin, "Access-Control-Expose-Headers": corsExposedHeaders } : {};
}

/** Where a newcomer's wrong guess is: the merchant prefix, or the OpenAPI document on the ops port. */
function notFoundHint(path: string): string {
  if (/^\/api\/v1(\/|$)/.test(path) && !path.startsWith("/api/v1/merchants/")) {
    return " Merchant routes start with /api/v1/merchants/{merchant}/, e.g. GET /api/v1/merchants/{merchant}/payment-intents.";
  }
  // Not served here: only the documented routes (and the checkout pages) answer on the API port.
  if (path === "/openapi.json") return " The OpenAPI document is served at /openapi.json on the ops port (OPS_PORT, default 9464), and is gen/openapi.json in the source.";
  return "";
}
