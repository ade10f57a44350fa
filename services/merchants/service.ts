import type { ServiceImpl } from "@connectrpc/connect";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { MerchantService, type MerchantProfile } from "../../gen/payments/v1/merchants_pb.ts";
import { MerchantLookError, merchantLook, updateMerchantLook } from "../auth/merchants.ts";
import { apiError } from "../platform/errors.ts";
import { merchantRequest } from "../rpc/context.ts";
import { textColorOn, type ShopLook } from "../vocabulary/shop-look.ts";

function profileMessage(m: ShopLook & { id: string; createdAt: Date }): MerchantProfile {
  return {
    $typeName: "payments.v1.MerchantProfile",
    id: m.id,
    name: m.name,
    logoUrl: m.logoUrl,
    brandColor: m.brandColor,
    brandTextColor: m.brandColor ? textColorOn(m.brandColor) : undefined,
    createdAt: timestampFromDate(m.createdAt),
  };
}

/** MerchantService's handler: the calling key's merchant's name and look, read and changed (auth/merchants.ts writes). */
export function merchantService(): ServiceImpl<typeof MerchantService> {
  return {
    async getMerchantProfile(_req, ctx) {
      const { principal, em } = merchantRequest(ctx);
      const found = await merchantLook(em, principal.merchantId);
      if (!found) throw apiError("not_found", `No merchant ${principal.merchantId}.`, "merchant");
      return { data: profileMessage(found) };
    },

    async updateMerchantProfile(req, ctx) {
      const { principal, em } = merchantRequest(ctx);
      try {
        const updated = await updateMerchantLook(em, principal.merchantId, { name: req.name, logoUrl: req.logoUrl, brandColor: req.brandColor });
        if (!updated) throw apiError("not_found", `No merchant ${principal.merchantId}.`, "merchant");
        return { data: profileMessage(updated) };
      } catch (err) {
        // Refused before anything is written: the field and what a valid value looks like.
        if (err instanceof MerchantLookError) throw apiError("validation_failed", err.message, err.field);
        throw err;
      }
    },
  };
}
