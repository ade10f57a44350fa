import type { Message } from "@bufbuild/protobuf";
import { createContextKey, type HandlerContext } from "@connectrpc/connect";
import type { InternalPrincipal, MerchantPrincipal, Principal } from "../auth/principal.ts";
import type { EntityManager } from "../platform/db.ts";
import { apiError } from "../platform/errors.ts";

export const principalKey = createContextKey<Principal | undefined>(undefined);
/** The request's EntityManager: a fork, or the transaction of an idempotent request. */
export const emKey = createContextKey<EntityManager | undefined>(undefined);
/** Set when an idempotent request is a repeat: the stored response to send instead of running the handler. */
export const replayKey = createContextKey<Message | undefined>(undefined);

function requestOf(ctx: HandlerContext): { principal: Principal; em: EntityManager } {
  const principal = ctx.values.get(principalKey);
  const em = ctx.values.get(emKey);
  if (!principal || !em) throw apiError("internal_error", "Request context is missing.");
  return { principal, em };
}

/** What a merchant-facing handler works with: the API key's owner and the request's EntityManager. */
export function merchantRequest(ctx: HandlerContext): { principal: MerchantPrincipal; em: EntityManager } {
  const { principal, em } = requestOf(ctx);
  if (principal.kind !== "api_key") throw apiError("internal_error", "A merchant route ran without an API key.");
  return { principal, em };
}

/** What an internal handler works with. */
export function internalRequest(ctx: HandlerContext): { principal: InternalPrincipal; em: EntityManager } {
  const { principal, em } = requestOf(ctx);
  if (principal.kind !== "internal") throw apiError("internal_error", "An internal route ran without an internal credential.");
  return { principal, em };
}

/** Runs `work` in the caller's transaction when there is one, else in a new one. */
export async function inTransaction<T>(em: EntityManager, work: (em: EntityManager) => Promise<T>): Promise<T> {
  return em.isInTransaction() ? work(em) : em.transactional(work);
}
