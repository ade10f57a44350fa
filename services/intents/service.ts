import type { ServiceImpl } from "@connectrpc/connect";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { IntentService } from "../../gen/payments/v1/payment_intents_pb.ts";
import { recordEvent } from "../events/record.ts";
import { canonicalJson } from "../platform/canonical-json.ts";
import type { CursorCodec } from "../platform/cursor.ts";
import { apiError, validationError } from "../platform/errors.ts";
import { newId } from "../platform/ids.ts";
import { inTransaction, merchantScope } from "../rpc/context.ts";
import { toEventData, toMessage, type IntentRow } from "./intent-message.ts";
import { isStatus, statuses } from "./status.ts";
import { findIntent, insertIntent, listIntents, type ListQuery } from "./store.ts";
import { transition } from "./transition.ts";
import { validateCreate, validatePageSize } from "./validate.ts";

export interface IntentDeps {
  checkoutBaseUrl: string;
  cursors: CursorCodec;
}

export function intentService(deps: IntentDeps): ServiceImpl<typeof IntentService> {
  const { checkoutBaseUrl, cursors } = deps;

  return {
    async createPaymentIntent(req, ctx) {
      const { principal, em } = merchantScope(ctx);
      const input = validateCreate(req);
      const now = new Date();
      const row: IntentRow = {
        id: newId("pi"),
        merchantId: principal.merchantId,
        environment: principal.environment,
        status: "pending",
        merchantReference: input.merchantReference,
        network: input.network,
        asset: input.asset,
        requestedAmount: input.requestedAmount,
        metadata: input.metadata,
        createdAt: now,
        expiresAt: new Date(now.getTime() + input.expiresInSeconds * 1000),
      };
      const message = toMessage(row, checkoutBaseUrl);
      await inTransaction(em, async (tx) => {
        await insertIntent(tx, row);
        await recordEvent(tx, {
          merchantId: row.merchantId,
          environment: principal.environment,
          type: "payment.intent.created",
          data: toEventData(message),
          paymentIntentId: row.id,
          createdAt: now,
        });
      });
      return { data: message };
    },

    async getPaymentIntent(req, ctx) {
      const { principal, em } = merchantScope(ctx);
      const row = await findIntent(em, principal, req.publicId);
      if (!row) throw apiError("not_found", `No payment intent ${req.publicId}.`, "public_id");
      return { data: toMessage(row, checkoutBaseUrl) };
    },

    async listPaymentIntents(req, ctx) {
      const { principal, em } = merchantScope(ctx);
      const limit = validatePageSize(req.limit);
      if (req.status !== undefined && !isStatus(req.status)) {
        throw validationError("status", `"status" must be one of ${statuses.join(", ")}.`);
      }
      const query: ListQuery = {
        status: req.status,
        createdAfter: req.createdAfter && timestampDate(req.createdAfter),
        createdBefore: req.createdBefore && timestampDate(req.createdBefore),
        publicId: req.publicId,
        merchantReference: req.merchantReference,
        limit: limit + 1,
      };
      // A cursor is valid only for the merchant, environment and filters it was made for.
      const scope = canonicalJson([principal.merchantId, principal.environment, { ...query, limit: undefined }]);
      query.after = cursors.start(scope, req.cursor);
      const page = cursors.page(scope, await listIntents(em, principal, query), limit, (r) => r);
      return { data: page.rows.map((r) => toMessage(r, checkoutBaseUrl)), hasMore: page.hasMore, nextCursor: page.nextCursor };
    },

    async cancelPaymentIntent(req, ctx) {
      const { principal, em } = merchantScope(ctx);
      const updated = await inTransaction(em, async (tx) => {
        const row = await findIntent(tx, principal, req.publicId, true);
        if (!row) throw apiError("not_found", `No payment intent ${req.publicId}.`, "public_id");
        return transition(tx, row, "cancelled", checkoutBaseUrl);
      });
      return { data: toMessage(updated, checkoutBaseUrl) };
    },
  };
}
