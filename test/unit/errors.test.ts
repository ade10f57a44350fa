import net from "node:net";
import t from "tap";
import { create, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { ConnectionException, DriverException, MikroORM } from "@mikro-orm/postgresql";
import pg from "pg";
import { ErrorDetailSchema } from "../../gen/payments/v1/options_pb.ts";
import {
  apiError,
  describeError,
  errorCodes,
  isDatabaseUnavailable,
  isTransientConflict,
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
  network_not_watched: 409,
  refund_exceeds_refundable: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  rate_limited: 429,
  internal_error: 500,
  unavailable: 503,
  rate_unavailable: 503,
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

// isDatabaseUnavailable is fed real errors: pg's own, from a closed port and from loopback
// servers that speak just enough of the PostgreSQL protocol to fail the way a server does.

interface Teardown {
  teardown(fn: () => unknown): void;
}

/** A PostgreSQL ErrorResponse message with the given fields (S severity, C SQLSTATE, M message). */
function errorResponse(fields: Record<string, string>): Buffer {
  const body = Buffer.concat([...Object.entries(fields).map(([k, v]) => Buffer.from(`${k}${v}\0`)), Buffer.from("\0")]);
  const head = Buffer.alloc(5);
  head.write("E", 0);
  head.writeInt32BE(body.length + 4, 1);
  return Buffer.concat([head, body]);
}

/** A loopback server that handles each connection's first bytes (pg's startup message) with `onStartup`. */
async function fakeServer(t: Teardown, onStartup: (socket: net.Socket) => void): Promise<string> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => undefined);
    socket.once("data", () => onStartup(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.teardown(() => {
    for (const s of sockets) s.destroy();
    return new Promise((resolve) => server.close(resolve));
  });
  return `postgres://payments@127.0.0.1:${(server.address() as net.AddressInfo).port}/payments`;
}

/** A server answering the startup message with a FATAL error of `code`. */
function refusingWith(t: Teardown, code: string, message: string): Promise<string> {
  return fakeServer(t, (s) => s.end(errorResponse({ S: "FATAL", V: "FATAL", C: code, M: message })));
}

/** The error pg's Client.connect rejects with. */
async function connectError(url: string, options: pg.ClientConfig = {}): Promise<Error> {
  const client = new pg.Client({ connectionString: url, ...options });
  try {
    await client.connect();
  } catch (err) {
    return err as Error;
  } finally {
    await client.end().catch(() => undefined);
  }
  throw new Error("connected, but an error was expected");
}

async function closedPortUrl(): Promise<string> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise((resolve) => server.close(resolve));
  return `postgres://payments@127.0.0.1:${port}/payments`;
}

/** The error MikroORM itself throws for a query on `url`. */
async function ormError(t: Teardown, url: string): Promise<Error> {
  const orm = await MikroORM.init({ clientUrl: url, entities: [], discovery: { warnWhenNoEntities: false }, debug: false, allowGlobalContext: true });
  t.teardown(() => orm.close());
  try {
    await orm.em.fork().execute("select 1");
  } catch (err) {
    return err as Error;
  }
  throw new Error("the query succeeded, but an error was expected");
}

t.test("isDatabaseUnavailable: a database that is down, restarting or unreachable", async (t) => {
  const refused = await connectError(await closedPortUrl());
  t.match(refused, { code: "ECONNREFUSED" }, "the real shape: connect ECONNREFUSED");
  t.ok(isDatabaseUnavailable(refused), "connection refused");

  const reset = await connectError(await fakeServer(t, (s) => s.resetAndDestroy()));
  t.match(reset, { code: "ECONNRESET" });
  t.ok(isDatabaseUnavailable(reset), "connection reset");

  const dropped = await connectError(await fakeServer(t, (s) => s.end()));
  t.equal(dropped.message, "Connection terminated unexpectedly");
  t.ok(isDatabaseUnavailable(dropped), "connection closed by the server");

  const silent = await fakeServer(t, () => undefined);
  const timedOut = await connectError(silent, { connectionTimeoutMillis: 100 });
  t.ok(isDatabaseUnavailable(timedOut), `a connect timeout (${timedOut.message})`);

  const sqlStates: [string, string][] = [
    ["57P01", "terminating connection due to administrator command"],
    ["57P02", "terminating connection because of crash of another server process"],
    ["57P03", "the database system is starting up"],
    ["08006", "connection failure"],
    ["08001", "could not establish connection"],
    ["53300", "sorry, too many clients already"],
    ["53100", "could not extend file: No space left on device"],
    ["57P04", "database dropped"],
    ["55000", 'database "payments" is not currently accepting connections'],
    ["3D000", 'database "payments" does not exist'],
    ["58030", "could not read block"],
  ];
  for (const [code, message] of sqlStates) {
    const err = await connectError(await refusingWith(t, code, message));
    t.match(err, { code, message }, `pg's DatabaseError for ${code}`);
    t.ok(isDatabaseUnavailable(err), `${code} ${message}`);
  }

  // The pool's own acquire timeout: its only connection is stuck connecting to a server that never answers.
  const pool = new pg.Pool({ connectionString: silent, max: 1, connectionTimeoutMillis: 150 });
  t.teardown(() => pool.end().catch(() => undefined));
  const [first, second] = await Promise.all([pool.connect().catch((e: Error) => e), pool.connect().catch((e: Error) => e)]);
  t.match([first, second].map((e) => (e as Error).message).sort(), ["Connection terminated due to connection timeout", "timeout exceeded when trying to connect"]);
  t.ok(isDatabaseUnavailable(first), `pool: ${(first as Error).message}`);
  t.ok(isDatabaseUnavailable(second), `pool: ${(second as Error).message}`);
});

t.test("isDatabaseUnavailable looks through MikroORM's exceptions, causes and AggregateError", async (t) => {
  const down = await ormError(t, await closedPortUrl());
  t.type(down, DriverException, "MikroORM wraps the pg error");
  t.match(down, { code: "ECONNREFUSED" });
  t.ok(isDatabaseUnavailable(down), "MikroORM's DriverException for a refused connection");

  const starting = await ormError(t, await refusingWith(t, "57P03", "the database system is starting up"));
  t.type(starting, DriverException);
  t.ok(isDatabaseUnavailable(starting), "MikroORM's DriverException for 57P03");

  const inner = await connectError(await closedPortUrl());
  t.ok(isDatabaseUnavailable(new ConnectionException(inner)), "ConnectionException");
  t.ok(isDatabaseUnavailable(new Error("query failed", { cause: inner })), "an Error whose cause is one");
  t.ok(isDatabaseUnavailable(new Error("outer", { cause: new Error("middle", { cause: inner }) })), "two causes deep");
  t.ok(isDatabaseUnavailable(new AggregateError([new Error("other"), inner], "all attempts failed")), "AggregateError with one among its errors");
  t.ok(isDatabaseUnavailable(new ConnectError("wrapped", Code.Unknown, undefined, undefined, inner)), "a ConnectError with one as its cause");
});

/** The error pg rejects a statement with, as it builds it from the server's ErrorResponse. */
function statementError(code: string, severity: string, message: string): pg.DatabaseError {
  return Object.assign(new pg.DatabaseError(message, message.length, "error"), { code, severity });
}

t.test("isDatabaseUnavailable: a statement refused by a read-only, timed-out or cancelled server", async (t) => {
  const cases: [string, string][] = [
    ["25006", "cannot execute INSERT in a read-only transaction"],
    ["57014", "canceling statement due to statement timeout"],
    ["57014", "canceling statement due to user request"],
  ];
  for (const [code, message] of cases) {
    t.ok(isDatabaseUnavailable(statementError(code, "ERROR", message)), `${code} ${message}`);
    t.ok(isDatabaseUnavailable(new DriverException(statementError(code, "ERROR", message))), `${code} wrapped by MikroORM`);
  }
});

t.test("isDatabaseUnavailable: bugs, bad statements and client errors are not outages", async (t) => {
  const sqlStates: [string, string][] = [
    ["23505", "duplicate key value violates unique constraint"],
    ["42601", "syntax error at or near"],
    ["42P01", "relation does not exist"],
    ["28P01", "password authentication failed for user"],
    ["55P03", "could not obtain lock"],
    ["40001", "could not serialize access"],
  ];
  for (const [code, message] of sqlStates) {
    const err = await connectError(await refusingWith(t, code, message));
    t.match(err, { code }, `pg's DatabaseError for ${code}`);
    t.notOk(isDatabaseUnavailable(err), `${code} ${message}`);
    t.notOk(isDatabaseUnavailable(new DriverException(err)), `${code} wrapped by MikroORM`);
  }
  // A statement's 55000 (e.g. lastval not yet defined) is a bug of ours, unlike the FATAL one at connect.
  t.notOk(isDatabaseUnavailable(statementError("55000", "ERROR", "lastval is not yet defined in this session")), "55000 as a statement's ERROR");
  const others: [string, unknown][] = [
    ["plain Error", new Error("boom")],
    ["TypeError", new TypeError("cannot read x of undefined")],
    ["apiError", apiError("not_found", "No such intent.")],
    ["apiError unavailable (ours, not the database's)", apiError("unavailable", "x")],
    ["ConnectError Unavailable without a cause", new ConnectError("peer down", Code.Unavailable)],
    ["a message that merely mentions a connection", new Error("Connection terminated unexpectedly: not really")],
    ["undefined", undefined],
    ["null", null],
    ["string", "ECONNREFUSED"],
    ["numeric code", Object.assign(new Error("x"), { code: 8006 })],
    ["AggregateError of others", new AggregateError([new Error("a"), new TypeError("b")])],
  ];
  for (const [name, err] of others) t.notOk(isDatabaseUnavailable(err), name);

  const loop: Error & { cause?: unknown } = new Error("loop");
  loop.cause = new Error("back", { cause: loop });
  t.notOk(isDatabaseUnavailable(loop), "a cycle of causes ends");
});

t.test("isTransientConflict: a lost deadlock or serialization race, worth trying again at once", async (t) => {
  t.ok(isTransientConflict(statementError("40P01", "ERROR", "deadlock detected")));
  t.ok(isTransientConflict(new DriverException(statementError("40001", "ERROR", "could not serialize access"))));
  t.notOk(isTransientConflict(statementError("23505", "ERROR", "duplicate key")));
  t.notOk(isTransientConflict(undefined));
});

t.test("the error table is one module with no imports, the one the OpenAPI plugin reads", async (t) => {
  const { readFileSync } = await import("node:fs");
  const source = readFileSync(new URL("../../services/platform/error-codes.ts", import.meta.url), "utf8");
  t.notMatch(source, /^\s*import\s/m, "error-codes.ts imports nothing");
  const { readErrorCodes } = await import("../../scripts/protoc-gen-openapi.ts");
  t.same(Object.fromEntries(readErrorCodes()), Object.fromEntries(Object.entries(errorCodes).map(([c, e]) => [c, e.status])));
});
