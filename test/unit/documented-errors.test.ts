// What the rpc port makes of an error before a client sees it: a documented code in an ErrorDetail,
// a message safe to show and bounded, a request id; in Connect's JSON framing as in the others.
import { Code, ConnectError } from "@connectrpc/connect";
import { createAsyncIterable, readAllBytes } from "@connectrpc/connect/protocol";
import { errorFromJsonBytes, errorToJsonBytes } from "@connectrpc/connect/protocol-connect";
import t from "tap";
import { ErrorDetailSchema } from "../../gen/payments/v1/options_pb.ts";
import { IntentService } from "../../gen/payments/v1/payment_intents_pb.ts";
import { apiError } from "../../services/platform/errors.ts";
import { documented, fixConnectError, jsonBodyDecoder, maxErrorMessageLength } from "../../services/rpc/documented-errors.ts";

const method = IntentService.method.createPaymentIntent;
const codeOf = (err: ConnectError | undefined) => err?.findDetails(ErrorDetailSchema)[0]?.code;

t.test("an error raised before decoding gets a documented code and a fixed message", async (t) => {
  const tooBig = documented(new ConnectError("message size 2000000 is larger than configured readMaxBytes 1048576", Code.ResourceExhausted), false, method, false, 1048576);
  t.equal(codeOf(tooBig), "payload_too_large");
  t.equal(tooBig?.rawMessage, "The request message exceeds 1048576 bytes.");
  const json = documented(new ConnectError('cannot decode field payments.v1.CreatePaymentIntentRequest.nope: unknown field "nope"', Code.InvalidArgument), false, method, true, 100);
  t.equal(codeOf(json), "validation_failed");
  t.equal(json?.rawMessage, "The request is not a payments.v1.CreatePaymentIntentRequest message: an unknown field, or a value of the wrong type.", "the parser is not quoted");
  const binary = documented(new ConnectError("premature EOF", Code.InvalidArgument), false, method, false, 100);
  t.equal(binary?.rawMessage, "The request is not one well-formed payments.v1.CreatePaymentIntentRequest message.");
  t.match(binary?.metadata.get("x-request-id"), /^req_/, "with a request id");
});

t.test("a documented error passes as it is; an undocumented one after decoding is described; long messages are cut", async (t) => {
  const ok = apiError("not_found", "No payment intent pi_x.", "public_id");
  ok.metadata.set("x-request-id", "req_1");
  t.equal(documented(ok, true, method, true, 100), undefined, "nothing to change");
  const internal = documented(new ConnectError("connection refused to 10.0.0.3:5432", Code.Internal), true, method, true, 100);
  t.equal(codeOf(internal), "internal_error");
  t.notMatch(internal?.rawMessage ?? "", /10\.0\.0\.3/, "internals are not shown");
  const long = apiError("validation_failed", "x".repeat(5000), "metadata");
  const cut = documented(long, true, method, true, 100);
  t.equal(cut?.rawMessage.length, maxErrorMessageLength);
  t.ok(cut?.rawMessage.endsWith("…"));
  t.equal(codeOf(cut), "validation_failed");
  t.equal(cut?.findDetails(ErrorDetailSchema)[0]?.param, "metadata");
});

t.test("Connect's JSON error body is rewritten, status and all", async (t) => {
  const sent = errorToJsonBytes(new ConnectError("message is too large", Code.ResourceExhausted), undefined);
  const res = await fixConnectError(
    { status: 429, header: new Headers({ "content-type": "application/json" }), body: createAsyncIterable([sent]) },
    (err) => documented(err, false, method, true, 1024),
  );
  t.equal(res.status, 429);
  const bytes = await readAllBytes(res.body as AsyncIterable<Uint8Array>, 1 << 20);
  const err = errorFromJsonBytes(bytes, undefined, new ConnectError("?", Code.Unknown));
  t.equal(codeOf(err), "payload_too_large");
  t.equal((res.header as Headers).get("content-length"), String(bytes.byteLength));
  t.match((res.header as Headers).get("x-request-id"), /^req_/);
});

t.test("a JSON body that is not one object, or names a key twice, is invalid_json", async (t) => {
  const enc = (s: string) => new TextEncoder().encode(s);
  t.equal(jsonBodyDecoder.decode(enc('{"a":1}')), '{"a":1}');
  for (const [body, message] of [
    ["{", /not valid UTF-8 JSON/],
    ["[1]", /must be a JSON object/],
    ['{"network":"ethereum","network":"bitcoin"}', /gives the key "network" more than once/],
  ] as const) {
    const err = t.throws(() => jsonBodyDecoder.decode(enc(body))) as unknown as ConnectError;
    t.equal(codeOf(err), "invalid_json", body);
    t.match(err.rawMessage, message);
  }
});
