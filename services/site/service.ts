import type { ServiceImpl } from "@connectrpc/connect";
import { CheckoutService, SiteService } from "../../gen/payments/v1/shopper_pb.ts";
import { canonicalOrigin } from "../auth/keys.ts";
import type { Intents } from "../intents/intents.ts";
import { validateCreate } from "../intents/validate.ts";
import { apiError } from "../platform/errors.ts";
import { inTransaction, requestOf } from "../rpc/context.ts";
import { originAllowedByAnySite } from "./credentials.ts";

/** The id shape newId("pi") makes: anything else cannot be an intent, and is not looked up. */
const intentIdPattern = /^pi_[0-9A-Za-z]{24}$/;

/** SiteService: a web shop creates and reads its intents, and sees only the shopper view. */
export function siteService(deps: { intents: Intents }): ServiceImpl<typeof SiteService> {
  const { intents } = deps;
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
      return { data: views.shopper(await intents.get(em, principal, req.publicId)) };
    },

    async checkSiteOrigin(req, ctx) {
      const { em } = requestOf(ctx, "public");
      const origin = canonicalOrigin(req.origin);
      return { allowed: origin !== undefined && (await originAllowedByAnySite(em, origin)) };
    },
  };
}

/** CheckoutService: the hosted checkout page's data, public by the intent's id. */
export function checkoutService(deps: { intents: Intents }): ServiceImpl<typeof CheckoutService> {
  const { intents } = deps;
  return {
    async getCheckout(req, ctx) {
      const { em } = requestOf(ctx, "public");
      const row = intentIdPattern.test(req.publicId) ? await intents.find(em, req.publicId) : undefined;
      if (!row) throw apiError("not_found", "No such payment.", "public_id");
      return { data: intents.views.shopper(row), testMode: row.environment === "test" };
    },
  };
}
