import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorDetailSchema } from "../../gen/payments/v1/options_pb.ts";
import { errorTable, type ErrorCode } from "./error-codes.ts";

export type { ErrorCode };

/**
 * The documented error codes (error-codes.ts), each with its HTTP status and the Connect/gRPC
 * code it travels as. The stable `code` itself rides along as an ErrorDetail.
 */
export const errorCodes = Object.fromEntries(
  Object.entries(errorTable).map(([code, e]) => [code, { status: e.status, connect: Code[e.grpc] }]),
) as { readonly [K in ErrorCode]: { readonly status: (typeof errorTable)[K]["status"]; readonly connect: Code } };



/** An error a client should see: a documented code, a message safe to show, and the field at fault. */
export function apiError(code: ErrorCode, message: string, param?: string): ConnectError {
  return new ConnectError(message, errorCodes[code].connect, undefined, [
    { desc: ErrorDetailSchema, value: create(ErrorDetailSchema, { code, param: param ?? "" }) },
  ]);
}

export function validationError(param: string, message: string): ConnectError {
  return apiError("validation_failed", message, param);
}

/** Codes for errors that carry no ErrorDetail (raised by Connect itself, or by a peer). */
const fallbackCodes: Partial<Record<Code, ErrorCode>> = {
  [Code.InvalidArgument]: "validation_failed",
  [Code.Unauthenticated]: "unauthenticated",
  [Code.PermissionDenied]: "insufficient_scope",
  [Code.NotFound]: "not_found",
  [Code.Unimplemented]: "route_not_found",
  [Code.ResourceExhausted]: "rate_limited",
  [Code.Unavailable]: "unavailable",
  [Code.DeadlineExceeded]: "unavailable",
};

const fallbackMessages: Partial<Record<ErrorCode, string>> = {
  validation_failed: "The request is not valid.",
  unauthenticated: "The request is not authenticated.",
  insufficient_scope: "The credential may not call this route.",
  not_found: "Not found.",
  route_not_found: "No such route.",
  rate_limited: "Too many requests; retry later.",
  unavailable: "The service is unavailable; retry later.",
};

export interface ApiErrorView {
  code: ErrorCode;
  status: number;
  message: string;
  param: string | undefined;
}

/** What a client sees of any error: internals of unexpected errors are never exposed. */
export function describeError(err: unknown): ApiErrorView {
  const ce = ConnectError.from(err);
  const detail = ce.findDetails(ErrorDetailSchema)[0];
  if (detail && detail.code in errorCodes) {
    const code = detail.code as ErrorCode;
    return { code, status: errorCodes[code].status, message: ce.rawMessage, param: detail.param || undefined };
  }
  // Without our detail the message comes from a library or a peer (e.g. a connection error
  // naming an internal address): show a fixed message instead.
  const code = fallbackCodes[ce.code] ?? "internal_error";
  return { code, status: errorCodes[code].status, message: fallbackMessages[code] ?? "An internal error occurred.", param: undefined };
}

/** Socket errors of a database that is down, restarting or unreachable. */
const unavailableErrnos = new Set(["ECONNREFUSED", "ECONNRESET", "EPIPE", "ETIMEDOUT", "EHOSTUNREACH", "ENETUNREACH", "ECONNABORTED", "ENOTFOUND", "EAI_AGAIN"]);

/**
 * SQLSTATE classes that are about reaching or using the server, not about the statement:
 * 08 connection exception, 53 insufficient resources (too many connections, disk full, out of
 * memory), 57 operator intervention (shutdown, crash, starting up, database dropped, statement
 * timeout or cancel), 58 system error (I/O).
 */
const unavailableSqlClasses = new Set(["08", "53", "57", "58"]);

/**
 * Single SQLSTATEs of a server that cannot serve this request now: 25006 read_only_sql_transaction
 * (a standby, or an old primary left read-only by a failover), 3D000 invalid_catalog_name (the
 * database is gone), 55000 object_not_in_prerequisite_state when it ends the session (FATAL: the
 * database is not accepting connections); as a statement's error 55000 is a bug of ours.
 */
function unavailableSqlState(code: string, severity: unknown): boolean {
  if (unavailableSqlClasses.has(code.slice(0, 2))) return true;
  if (code === "25006" || code === "3D000") return true;
  return code === "55000" && (severity === "FATAL" || severity === "PANIC");
}

const sqlStatePattern = /^[0-9A-Z]{5}$/;

/** pg's and pg-pool's own messages for a connection that is gone or never came (they carry no code). */
const unavailableMessages = [
  /^Connection terminated unexpectedly$/,
  /^Connection terminated$/,
  /^Connection terminated due to connection timeout$/,
  // pg.Client's own connectionTimeoutMillis (a pool wraps it in the message above).
  /^timeout expired$/,
  /^Client has encountered a connection error and is not queryable$/,
  /^timeout exceeded when trying to connect$/,
  // pg.Client's query_timeout.
  /^Query read timeout$/,
];

/**
 * Whether an error means the database cannot serve right now (down, restarting, unreachable,
 * refusing connections, read-only, gone, out of connections or resources, timed out), as
 * opposed to a bug or a bad statement: such a request is worth retrying shortly, and the
 * connection it failed on is not to be reused. Looks through MikroORM's DriverException (which
 * copies the pg error's code onto itself), `cause` chains and AggregateError's `errors`.
 */
export function isDatabaseUnavailable(err: unknown): boolean {
  const seen = new Set<unknown>();
  const visit = (e: unknown, depth: number): boolean => {
    if (e === null || typeof e !== "object" || seen.has(e) || depth > 8) return false;
    seen.add(e);
    const { code, severity, message, cause, errors } = e as { code?: unknown; severity?: unknown; message?: unknown; cause?: unknown; errors?: unknown };
    if (typeof code === "string") {
      if (unavailableErrnos.has(code)) return true;
      if (sqlStatePattern.test(code) && unavailableSqlState(code, severity)) return true;
    }
    if (typeof message === "string" && unavailableMessages.some((m) => m.test(message))) return true;
    if (visit(cause, depth + 1)) return true;
    return Array.isArray(errors) && errors.some((x) => visit(x, depth + 1));
  };
  return visit(err, 0);
}

/**
 * A statement that lost a race another transaction won (40001 serialization_failure, 40P01
 * deadlock_detected): the database is fine and the same write succeeds when tried again.
 */
export function isTransientConflict(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === "40001" || code === "40P01";
}
