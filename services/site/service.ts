import type { ServiceImpl } from "@connectrpc/connect";
import { SiteService } from "../../gen/payments/v1/shopper_pb.ts";
import { canonicalOrigin } from "../auth/keys.ts";
import type { Intents } from "../intents/intents.ts";
import { validateCreate } from "../intents/validate.ts";
import { inTransaction, requestOf } from "../rpc/context.ts";
import { intentWithTransactions, type TransactionsOf } from "../intents/service.ts";
import { originAllowedByAnySite } from "./credentials.ts";

/** SiteService: a web shop creates and reads its intents, and sees only the shopper view. */
export function siteService(deps: { intents: Intents; transactionsOf: TransactionsOf }): ServiceImpl<typeof SiteService> {
  const { intents, transactionsOf } = deps;
  const { views } = intents;
  return {
    async createSitePaymentIntent(req, ctx) {
      const { principal, em } = requestOf(ctx, "site");
      // The merchant API's own rules; metadata is not the shop's to set.
      const input = validateCreate({ ...req, merchant: "", metadata: {}, $typeName: "payments.v1.CreatePaymentIntentRequest" });
      const row = await inTransaction(em, (tx) => intents.create(tx, principal, input, { source: "site" }));
      return { data: views.shopper(row) };
    },

    async getSitePaymentIntent(req, ctx) {
      const { principal, em } = requestOf(ctx, "site");
      // With its outputs, from one snapshot, as the checkout page reads it (other assets received).
      const row = await intentWithTransactions(em, transactionsOf, (em) => intents.get(em, principal, req.publicId));
      return { data: views.shopper(row) };
    },

    async checkSiteOrigin(req, ctx) {
      const { em } = requestOf(ctx, "public");
      const origin = canonicalOrigin(req.origin);
      return { allowed: origin !== undefined && (await originAllowedByAnySite(em, origin)) };
    },
  };
}
