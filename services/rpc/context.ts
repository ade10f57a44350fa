import type { Message } from "@bufbuild/protobuf";
import { createContextKey, type HandlerContext } from "@connectrpc/connect";
import type { Owner } from "../auth/keys.ts";
import type { EntityManager } from "../platform/db.ts";
import { apiError } from "../platform/errors.ts";

/** Who is calling: resolved from the credential, never from the request body. */
export interface Principal extends Owner {
  keyId: string;
  scopes: ReadonlySet<string>;
}

export const principalKey = createContextKey<Principal | undefined>(undefined);
/** The request's EntityManager: a fork, or the transaction of an idempotent request. */
export const emKey = createContextKey<EntityManager | undefined>(undefined);
/** Set when an idempotent request is a repeat: the stored response to send instead of running the handler. */
export const replayKey = createContextKey<Message | undefined>(undefined);

/** What a merchant-facing handler works with. */
export function merchantScope(ctx: HandlerContext): { principal: Principal; em: EntityManager } {
  const principal = ctx.values.get(principalKey);
  const em = ctx.values.get(emKey);
  if (!principal || !em) throw apiError("internal_error", "Request context is missing.");
  return { principal, em };
}

/** Runs `work` in the caller's transaction when there is one, else in a new one. */
export async function inTransaction<T>(em: EntityManager, work: (em: EntityManager) => Promise<T>): Promise<T> {
  return em.isInTransaction() ? work(em) : em.transactional(work);
}
