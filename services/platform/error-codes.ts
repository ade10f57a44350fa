// The one table of error types: each documented code with its HTTP status and the gRPC code it
// travels as (the stable code itself rides along as an ErrorDetail). No imports, so the service
// (platform/errors.ts) and the OpenAPI plugin (scripts/protoc-gen-openapi.ts) read the same table.

/** The gRPC status codes the table uses, by their names in @connectrpc/connect's Code. */
export type GrpcCodeName =
  | "Aborted"
  | "AlreadyExists"
  | "FailedPrecondition"
  | "Internal"
  | "InvalidArgument"
  | "NotFound"
  | "PermissionDenied"
  | "ResourceExhausted"
  | "Unauthenticated"
  | "Unavailable"
  | "Unimplemented";

export const errorTable = {
  validation_failed: { status: 400, grpc: "InvalidArgument" },
  invalid_json: { status: 400, grpc: "InvalidArgument" },
  idempotency_key_required: { status: 400, grpc: "InvalidArgument" },
  invalid_idempotency_key: { status: 400, grpc: "InvalidArgument" },
  invalid_cursor: { status: 400, grpc: "InvalidArgument" },
  unauthenticated: { status: 401, grpc: "Unauthenticated" },
  invalid_api_key: { status: 401, grpc: "Unauthenticated" },
  session_expired: { status: 401, grpc: "Unauthenticated" },
  insufficient_scope: { status: 403, grpc: "PermissionDenied" },
  merchant_mismatch: { status: 403, grpc: "PermissionDenied" },
  test_mode_only: { status: 403, grpc: "PermissionDenied" },
  not_found: { status: 404, grpc: "NotFound" },
  route_not_found: { status: 404, grpc: "NotFound" },
  method_not_allowed: { status: 405, grpc: "Unimplemented" },
  idempotency_conflict: { status: 409, grpc: "AlreadyExists" },
  idempotency_in_progress: { status: 409, grpc: "Aborted" },
  invalid_state: { status: 409, grpc: "FailedPrecondition" },
  deposit_address_unavailable: { status: 409, grpc: "FailedPrecondition" },
  network_not_watched: { status: 409, grpc: "FailedPrecondition" },
  refund_exceeds_refundable: { status: 409, grpc: "FailedPrecondition" },
  payload_too_large: { status: 413, grpc: "ResourceExhausted" },
  unsupported_media_type: { status: 415, grpc: "InvalidArgument" },
  rate_limited: { status: 429, grpc: "ResourceExhausted" },
  internal_error: { status: 500, grpc: "Internal" },
  unavailable: { status: 503, grpc: "Unavailable" },
  rate_unavailable: { status: 503, grpc: "Unavailable" },
} as const satisfies Record<string, { status: number; grpc: GrpcCodeName }>;

export type ErrorCode = keyof typeof errorTable;
