import type { ServiceImpl } from "@connectrpc/connect";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { create } from "@bufbuild/protobuf";
import { CreatePaymentIntentResponseSchema, IntentService, type CreatePaymentIntentResponse } from "../../gen/payments/v1/payment_intents_pb.ts";
import { canonicalJson } from "../platform/canonical-json.ts";
import type { CursorCodec } from "../platform/cursor.ts";
import type { EntityManager } from "../platform/db.ts";
import { claimKey } from "../idempotency/context-keys.ts";
import { inTransaction, merchantRequest, oneSnapshot } from "../rpc/context.ts";
import type { Intents } from "./intents.ts";
import type { Status } from "./status.ts";
import { listIntents, type IntentRow, type ListFilters, type TransactionFact } from "./store.ts";
import { exportCsv } from "./export.ts";
import { validationError } from "../platform/errors.ts";
import { validateCreate, pageSizeOf } from "./validate.ts";

export interface IntentDeps {
  intents: Intents;
  cursors: CursorCodec;
  /** The chain outputs of the given intents (the observations domain records them, above this one). */
  transactionsOf: TransactionsOf;
}

export type TransactionsOf = (em: EntityManager, intentIds: readonly string[]) => Promise<Map<string, TransactionFact[]>>;

/** IntentService's handlers: request in, domain call, view out. */
export function intentService(deps: IntentDeps): ServiceImpl<typeof IntentService> {
  const { intents, cursors, transactionsOf } = deps;
  const { views } = intents;

  return {
    async createPaymentIntent(req, ctx) {
      const { principal, em } = merchantRequest(ctx);
      const input = validateCreate(req);
      const claim = ctx.values.get(claimKey);
      if (claim) {
        const created = await intents.createClaimed(em, principal, input, claim, (data) => create(CreatePaymentIntentResponseSchema, { data }));
        if ("replay" in created) {
          ctx.responseHeader.set("idempotent-replayed", "true");
          return created.replay as CreatePaymentIntentResponse;
        }
        return created.message as CreatePaymentIntentResponse;
      }
      const row = await inTransaction(em, (tx) => intents.create(tx, principal, input));
      return { data: views.message(row) };
    },

    async getPaymentIntent(req, ctx) {
      const { principal, em } = merchantRequest(ctx);
      const row = await intentWithTransactions(em, transactionsOf, (em) => intents.get(em, principal, req.publicId));
      return { data: views.message(row) };
    },

    async listPaymentIntents(req, ctx) {
      const { principal, em } = merchantRequest(ctx);
      const limit = pageSizeOf(req.limit);
      const filters: ListFilters = {
        // One of the statuses, or absent: its field rules (one_of) were checked before this handler.
        status: req.status as Status | undefined,
        createdAfter: req.createdAfter && timestampDate(req.createdAfter),
        createdBefore: req.createdBefore && timestampDate(req.createdBefore),
        publicId: req.publicId,
        merchantReference: req.merchantReference,
      };
      // A cursor is valid only for the merchant, environment and filters it was made for.
      const binding = canonicalJson([principal.merchantId, principal.environment, filters]);
      const { page, rows } = await oneSnapshot(em, async (tx) => {
        const page = await listIntents(tx, cursors, principal, filters, { cursor: req.cursor, limit, binding });
        return { page, rows: await withTransactions(tx, transactionsOf, page.rows) };
      });
      return { data: rows.map((r) => views.message(r)), hasMore: page.hasMore, nextCursor: page.nextCursor };
    },

    async *exportPaymentIntents(req, ctx) {
      const { principal, em } = merchantRequest(ctx);
      const createdAfter = req.createdAfter && timestampDate(req.createdAfter);
      // Unset: up to the export's start, so what is created while it runs is left out.
      const createdBefore = req.createdBefore ? timestampDate(req.createdBefore) : new Date();
      // Both given the wrong way round is a mistake worth saying; a range in the future is only empty.
      if (createdAfter && req.createdBefore && createdAfter.getTime() >= createdBefore.getTime()) {
        throw validationError("created_after", "created_after must be before created_before.");
      }
      // One of the statuses, or absent: its field rules (one_of) were checked before this handler.
      const filters: ListFilters = { status: req.status as Status | undefined, createdAfter, createdBefore, publicId: req.publicId, merchantReference: req.merchantReference };
      for await (const chunk of exportCsv(em, intents, transactionsOf, principal, filters)) {
        if (ctx.signal.aborted) return;
        yield { chunk };
      }
    },

    async cancelPaymentIntent(req, ctx) {
      const { principal, em } = merchantRequest(ctx);
      const row = await inTransaction(em, (tx) => intents.cancel(tx, principal, req.publicId));
      return { data: views.message(row) };
    },
  };
}

/**
 * One intent with its transactions, both from one snapshot. An intent that never saw a payment
 * has none: one statement is a snapshot of its own, so that intent is read without opening a
 * transaction (one round trip to the database instead of three; a checkout page or a merchant
 * polling a pending intent reads it this way). One that saw a payment is read again with its
 * transactions in a read-only snapshot, so a payment recorded in between shows in both or neither.
 */
export async function intentWithTransactions<R extends IntentRow | undefined>(
  em: EntityManager,
  transactionsOf: TransactionsOf,
  read: (em: EntityManager) => Promise<R>,
): Promise<R> {
  const withThem = async (em: EntityManager): Promise<R> => {
    const row = await read(em);
    return row && ((await withTransactions(em, transactionsOf, [row]))[0] as R);
  };
  if (!em.isInTransaction()) {
    const row = await read(em);
    if (!row || row.amountReceived === null) return row;
  }
  return oneSnapshot(em, withThem);
}

/** The intents with their transactions: one query, and none for intents that never saw one. */
export async function withTransactions(em: EntityManager, transactionsOf: TransactionsOf, rows: IntentRow[]): Promise<IntentRow[]> {
  const seen = rows.filter((r) => r.amountReceived !== null).map((r) => r.id);
  if (seen.length === 0) return rows;
  const byIntent = await transactionsOf(em, seen);
  return rows.map((r) => (byIntent.has(r.id) ? { ...r, transactions: byIntent.get(r.id) } : r));
}
