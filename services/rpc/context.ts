import { createContextKey, type HandlerContext } from "@connectrpc/connect";
import type { Environment } from "../auth/keys.ts";
import type { InternalPrincipal, MerchantPrincipal, Principal } from "../auth/principal.ts";
import { IsolationLevel } from "@mikro-orm/core";
import type { EntityManager } from "../platform/db.ts";
import { apiError } from "../platform/errors.ts";

export const principalKey = createContextKey<Principal | undefined>(undefined);
/** The request's EntityManager: a fork, or the transaction of an idempotent request. */
export const emKey = createContextKey<EntityManager | undefined>(undefined);

/** What a handler works with: the caller, of the kind its route takes, and the request's EntityManager. */
export function requestOf<K extends Principal["kind"]>(ctx: HandlerContext, kind: K): { principal: Extract<Principal, { kind: K }>; em: EntityManager } {
  const principal = ctx.values.get(principalKey);
  const em = ctx.values.get(emKey);
  if (!principal || !em) throw apiError("internal_error", "Request context is missing.");
  if (principal.kind !== kind) throw apiError("internal_error", `A ${kind} route ran with a ${principal.kind} caller.`);
  return { principal: principal as Extract<Principal, { kind: K }>, em };
}

/** What a merchant-facing handler works with: the API key's owner and the request's EntityManager. */
export function merchantRequest(ctx: HandlerContext): { principal: MerchantPrincipal; em: EntityManager } {
  return requestOf(ctx, "api_key");
}

/** What an internal handler works with. */
export function internalRequest(ctx: HandlerContext): { principal: InternalPrincipal; em: EntityManager } {
  return requestOf(ctx, "internal");
}

/**
 * What a chain watcher's handler works with: an internal caller and its chain's environment. A
 * chain is a network in an environment; a credential issued before credentials had one has none.
 */
export function chainRequest(ctx: HandlerContext): { principal: InternalPrincipal; em: EntityManager; environment: Environment } {
  const { principal, em } = internalRequest(ctx);
  if (!principal.environment) {
    throw apiError("insufficient_scope", "This internal credential has no environment; issue a watcher's credential with --roles observe --environment test|live.");
  }
  return { principal, em, environment: principal.environment };
}

/**
 * Runs reads on one snapshot (a read-only REPEATABLE READ transaction): a commit between them
 * cannot show part of itself, so a row and what belongs to it (an intent and its transactions)
 * agree. In the caller's transaction when there is one.
 */
export async function oneSnapshot<T>(em: EntityManager, reads: (em: EntityManager) => Promise<T>): Promise<T> {
  return em.isInTransaction() ? reads(em) : em.transactional(reads, { isolationLevel: IsolationLevel.REPEATABLE_READ, readOnly: true });
}

/** Runs `work` in the caller's transaction when there is one, else in a new one. */
export async function inTransaction<T>(em: EntityManager, work: (em: EntityManager) => Promise<T>): Promise<T> {
  return em.isInTransaction() ? work(em) : em.transactional(work);
}
