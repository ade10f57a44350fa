import type { ServiceImpl } from "@connectrpc/connect";
import { CheckoutService } from "../../gen/payments/v1/shopper_pb.ts";
import type { Intents } from "../intents/intents.ts";
import { intentWithTransactions, type TransactionsOf } from "../intents/service.ts";
import { apiError } from "../platform/errors.ts";
import { requestOf } from "../rpc/context.ts";
import { merchantLook } from "../auth/merchants.ts";

/** The id shape newId("pi") makes: anything else cannot be an intent, and is not looked up. */
const intentIdPattern = /^pi_[0-9A-Za-z]{24}$/;

/** CheckoutService: the hosted checkout page's data, public by the intent's id. */
export function checkoutService(deps: { intents: Intents; transactionsOf: TransactionsOf }): ServiceImpl<typeof CheckoutService> {
  const { intents, transactionsOf } = deps;
  return {
    async getCheckout(req, ctx) {
      const { em } = requestOf(ctx, "public");
      // With its outputs, from one snapshot: a payment in another asset is something the shopper must hear of.
      const row = intentIdPattern.test(req.publicId)
        ? await intentWithTransactions(em, transactionsOf, (em) => intents.find(em, req.publicId))
        : undefined;
      if (!row) throw apiError("not_found", "No such payment.", "public_id");
      const look = await merchantLook(em, row.merchantId);
      return { data: intents.views.shopper(row), testMode: row.environment === "test", merchantName: look?.name ?? "", merchantLogoUrl: look?.logoUrl, merchantBrandColor: look?.brandColor };
    },
  };
}
