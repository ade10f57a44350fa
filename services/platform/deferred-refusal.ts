import type { ConnectError } from "@connectrpc/connect";
import { apiError, type ApiErrorView, type ErrorCode } from "./errors.ts";

/**
 * A REST request whose body or query the gateway cannot read is still authenticated and
 * authorized before it is refused, as a payment API checks (who, then may they, then what they
 * sent): the gateway calls the RPC with an empty request and its refusal in this header, and the
 * RPC server raises it once the caller has passed those checks. A gRPC client setting the header
 * itself only gets its own words back, as a 400, and only after the same checks.
 */
export const deferredRefusalHeader = "x-gateway-refusal";

/** The refusals a gateway defers: those about what was sent, never about who sent it. */
const deferrable = new Set<ErrorCode>(["invalid_json", "validation_failed", "unsupported_media_type"]);

export function canDefer(view: ApiErrorView): boolean {
  return deferrable.has(view.code);
}

export function encodeRefusal(view: ApiErrorView): string {
  return Buffer.from(JSON.stringify({ code: view.code, message: view.message, param: view.param ?? "" })).toString("base64url");
}

/** The refusal a header carries; a header that is not one of ours is refused as such. */
export function decodeRefusal(header: string): ConnectError {
  try {
    const { code, message, param } = JSON.parse(Buffer.from(header, "base64url").toString("utf8")) as Record<string, unknown>;
    if (typeof code === "string" && deferrable.has(code as ErrorCode) && typeof message === "string" && typeof param === "string") {
      return apiError(code as ErrorCode, message.slice(0, 500), param.slice(0, 200) || undefined);
    }
  } catch {
    // not ours
  }
  return apiError("validation_failed", `The ${deferredRefusalHeader} header is not one the gateway wrote.`);
}
