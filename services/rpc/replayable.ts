import type { DescService } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { replayKey } from "../idempotency/context-keys.ts";

type Handler = (req: unknown, ctx: HandlerContext) => unknown;

/**
 * Wraps every method of a service so that a repeated idempotent request is
 * answered with its stored response, marked Idempotent-Replayed, without
 * running the handler again.
 */
export function replayable<S extends DescService>(impl: ServiceImpl<S>): ServiceImpl<S> {
  const wrapped: Record<string, Handler> = {};
  for (const [name, handler] of Object.entries(impl as Record<string, Handler>)) {
    wrapped[name] = (req, ctx) => {
      const stored = ctx.values.get(replayKey);
      if (stored === undefined) return handler(req, ctx);
      ctx.responseHeader.set("idempotent-replayed", "true");
      return stored;
    };
  }
  return wrapped as ServiceImpl<S>;
}
