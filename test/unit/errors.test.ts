import t from "tap";
import { create, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorDetailSchema } from "../../gen/payments/v1/options_pb.ts";
import {
  apiError,
  describeError,
  errorCodes,
  validationError,
  type ErrorCode,
} from "../../services/platform/errors.ts";

const expectedStatus: Record<ErrorCode, number> = {
  validation_failed: 400,
  invalid_json: 400,
  idempotency_key_required: 400,
  invalid_idempotency_key: 400,
  invalid_cursor: 400,
  unauthenticated: 401,
  invalid_api_key: 401,
  session_expired: 401,
  insufficient_scope: 403,
  merchant_mismatch: 403,
  test_mode_only: 403,
  not_found: 404,
  route_not_found: 404,
  method_not_allowed: 405,
  idempotency_conflict: 409,
  idempotency_in_progress: 409,
  invalid_state: 409,
  deposit_address_unavailable: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  rate_limited: 429,
  internal_error: 500,
  unavailable: 503,
};

t.test("every documented code round-trips through describeError", async (t) => {
  t.same(Object.keys(errorCodes).sort(), Object.keys(expectedStatus).sort(), "the documented code list");
  for (const code of Object.keys(expectedStatus) as ErrorCode[]) {
    const view = describeError(apiError(code, `message for ${code}`, "some_field"));
    t.same(
      view,
      { code, status: expectedStatus[code], message: `message for ${code}`, param: "some_field" },
      code,
    );
  }
});

t.test("param is optional", async (t) => {
  t.equal(describeError(apiError("not_found", "No such intent.")).param, undefined, "omitted");
  t.equal(describeError(apiError("not_found", "No such intent.", "")).param, undefined, "empty");
});

t.test("apiError travels as the mapped Connect code", async (t) => {
  t.equal(apiError("validation_failed", "x").code, Code.InvalidArgument);
  t.equal(apiError("not_found", "x").code, Code.NotFound);
  t.equal(apiError("idempotency_conflict", "x").code, Code.AlreadyExists);
  t.equal(apiError("unavailable", "x").code, Code.Unavailable);
  t.equal(apiError("internal_error", "x").code, Code.Internal);
});

t.test("validationError", async (t) => {
  t.same(describeError(validationError("requested_amount", "Bad amount.")), {
    code: "validation_failed",
    status: 400,
    message: "Bad amount.",
    param: "requested_amount",
  });
});

t.test("the detail survives serialisation (as received from the RPC server)", async (t) => {
  // Details parsed from the wire arrive as type name and bytes, not as a message.
  const wire = new ConnectError("Key reused with another body.", Code.AlreadyExists);
  wire.details.push({
    type: ErrorDetailSchema.typeName,
    value: toBinary(ErrorDetailSchema, create(ErrorDetailSchema, { code: "idempotency_conflict", param: "" })),
  });
  t.same(describeError(wire), {
    code: "idempotency_conflict",
    status: 409,
    message: "Key reused with another body.",
    param: undefined,
  });
});

t.test("unexpected errors never leak their internals", async (t) => {
  const cases: [string, unknown][] = [
    ["plain Error", new Error("secret internals")],
    ["TypeError", new TypeError("secret internals: cannot read x of undefined")],
    ["ConnectError Internal", new ConnectError("secret internals", Code.Internal)],
    ["ConnectError Unknown", new ConnectError("secret internals", Code.Unknown)],
    ["ConnectError DataLoss", new ConnectError("secret internals", Code.DataLoss)],
    ["thrown string", "secret internals"],
    ["thrown object", { message: "secret internals" }],
    ["undefined", undefined],
  ];
  for (const [name, err] of cases) {
    const view = describeError(err);
    t.equal(view.code, "internal_error", `${name}: code`);
    t.equal(view.status, 500, `${name}: status`);
    t.notMatch(view.message, /secret internals/, `${name}: message hides the internals`);
    t.ok(view.message.length > 0, `${name}: message is not empty`);
    t.equal(view.param, undefined, `${name}: no param`);
  }
});

t.test("an internal_error raised on purpose shows its chosen message", async (t) => {
  // apiError("internal_error") carries a message chosen to be safe; it is shown as given.
  t.equal(describeError(apiError("internal_error", "Try again later.")).message, "Try again later.");
});

t.test("a detail with an undocumented code falls back to the Connect code", async (t) => {
  const err = new ConnectError("secret internals", Code.Internal, undefined, [
    { desc: ErrorDetailSchema, value: create(ErrorDetailSchema, { code: "bogus_code", param: "x" }) },
  ]);
  const view = describeError(err);
  t.equal(view.code, "internal_error");
  t.notMatch(view.message, /secret internals/);
});

t.test("a ConnectError without detail maps by its Connect code", async (t) => {
  const cases: [Code, ErrorCode, number][] = [
    [Code.Unavailable, "unavailable", 503],
    [Code.DeadlineExceeded, "unavailable", 503],
    [Code.InvalidArgument, "validation_failed", 400],
    [Code.Unauthenticated, "unauthenticated", 401],
    [Code.PermissionDenied, "insufficient_scope", 403],
    [Code.NotFound, "not_found", 404],
    [Code.Unimplemented, "route_not_found", 404],
    [Code.ResourceExhausted, "rate_limited", 429],
  ];
  for (const [connectCode, code, status] of cases) {
    const view = describeError(new ConnectError("connect ECONNREFUSED 10.0.0.7:8081", connectCode));
    t.same({ ...view, message: undefined }, { code, status, message: undefined, param: undefined }, Code[connectCode]);
    t.notMatch(view.message, /ECONNREFUSED|10\.0\.0\.7/, `${Code[connectCode]}: a peer's message is not shown`);
    t.ok(view.message.length > 0);
  }
});
