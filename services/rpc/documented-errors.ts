import { Code, ConnectError, createContextKey, createContextValues, type Interceptor } from "@connectrpc/connect";
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
import { compressionBrotli, compressionGzip } from "@connectrpc/connect-node";
import type { DescMethod } from "@bufbuild/protobuf";
import { ErrorDetailSchema } from "../../gen/payments/v1/options_pb.ts";
import { apiError, describeError, errorCodes } from "../platform/errors.ts";
import { newId } from "../platform/ids.ts";
import { repeatedKey } from "../platform/json-keys.ts";

// Every error the rpc port answers with, in each protocol's own framing (gRPC trailers, gRPC-Web's
// trailer envelope, Connect's JSON body), carries a payments.v1.ErrorDetail and a message safe to
// show. Connect raises some errors itself before any interceptor runs; they are rewritten here.

/** Error messages can quote input (an id, a value); HTTP/2 peers refuse header blocks past ~16-64 KB. */
export const maxErrorMessageLength = 1000;

/** The compressions the rpc port accepts (and so may find in an answer it rewrites). */
export const compressions: Compression[] = [compressionGzip, compressionBrotli];

/** Set once a call gets past decoding: errors raised before it come from Connect's protocol layer. */
export const decodedKey = createContextKey(false);

/** The outermost interceptor: marks the call decoded, and bounds the message of whatever it throws. */
export const boundary: Interceptor = (next) => async (req) => {
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
export const jsonBodyDecoder = {
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
export function documented(err: ConnectError, decoded: boolean, method: DescMethod, json: boolean, limit: number): ConnectError | undefined {
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
export function withDocumentedErrors(inner: UniversalHandler, limit: number): UniversalHandler {
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
    // Connect answers a unary content type sent to a stream (or the reverse) with a bare 415.
    if (res.status === 415) return unsupportedMediaType(res, method);
    return res;
  }
  return Object.assign(handle, inner);
}

export type Fix = (err: ConnectError) => ConnectError | undefined;

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

/** A bare 415 as a documented error, naming the content types the method takes. */
function unsupportedMediaType(res: UniversalServerResponse, method: DescMethod): UniversalServerResponse {
  const takes =
    method.methodKind === "unary"
      ? "application/json or application/proto (Connect), application/grpc or application/grpc-web"
      : "application/connect+json or application/connect+proto (Connect streaming), application/grpc or application/grpc-web";
  const err = apiError("unsupported_media_type", `This method takes ${takes}.`);
  err.metadata.set("x-request-id", newId("req"));
  const body = errorToJsonBytes(err, undefined);
  const header = new Headers(res.header);
  header.set("content-type", "application/json");
  header.set("content-length", String(body.byteLength));
  err.metadata.forEach((value, key) => {
    if (!header.has(key)) header.set(key, value);
  });
  return { ...res, header, body: createAsyncIterable([body]) };
}

/** Connect unary: the error is the JSON body of a non-200 answer. */
export async function fixConnectError(res: UniversalServerResponse, fix: Fix): Promise<UniversalServerResponse> {
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
