import type { ServiceImpl } from "@connectrpc/connect";
import { RefundClaimService, RefundService } from "../../gen/payments/v1/refunds_pb.ts";
import { merchantLook } from "../auth/merchants.ts";
import { apiError } from "../platform/errors.ts";
import { inTransaction, merchantRequest, oneSnapshot, requestOf } from "../rpc/context.ts";
import type { Refunds } from "./refunds.ts";

/** RefundService's handlers: request in, domain call, view out. */
export function refundService(deps: { refunds: Refunds }): ServiceImpl<typeof RefundService> {
  const { refunds } = deps;
  const { views } = refunds;
  return {
    async createRefund(req, ctx) {
      const { principal, em } = merchantRequest(ctx);
      const row = await inTransaction(em, (tx) =>
        refunds.create(tx, principal, req.publicId, { amount: req.amount, priceAmount: req.priceAmount, priceCurrency: req.priceCurrency, payment: req.payment, address: req.address, reason: req.reason, rate: req.rate }),
      );
      return { data: views.message(row) };
    },

    async listRefunds(req, ctx) {
      const { principal, em } = merchantRequest(ctx);
      const rows = await oneSnapshot(em, (tx) => refunds.listOf(tx, principal, req.publicId));
      return { data: rows.map((r) => views.message(r)) };
    },

    async getRefund(req, ctx) {
      const { principal, em } = merchantRequest(ctx);
      return { data: views.message(await refunds.get(em, principal, req.refundId)) };
    },

    async getRefundPsbt(req, ctx) {
      const { principal, em } = merchantRequest(ctx);
      const built = await oneSnapshot(em, (tx) => refunds.psbt(tx, principal, req.refundId, req.feeRate));
      return { data: views.psbt(req.refundId, req.feeRate, built) };
    },

    async cancelRefund(req, ctx) {
      const { principal, em } = merchantRequest(ctx);
      const row = await inTransaction(em, (tx) => refunds.cancel(tx, principal, req.refundId));
      return { data: views.message(row) };
    },
  };
}

/** RefundClaimService: the claim page's data, public by the claim token. */
export function refundClaimService(deps: { refunds: Refunds }): ServiceImpl<typeof RefundClaimService> {
  const { refunds } = deps;
  const claimOf = async (em: Parameters<typeof merchantLook>[0], row: Awaited<ReturnType<Refunds["get"]>>) => {
    const look = await merchantLook(em, row.merchantId);
    return refunds.views.claim(row, look?.name ?? "");
  };
  return {
    async getRefundClaim(req, ctx) {
      const { em } = requestOf(ctx, "public");
      const row = await refunds.findByToken(em, req.token);
      if (!row) throw apiError("not_found", "No such refund.", "token");
      return { data: await claimOf(em, row) };
    },

    async submitRefundAddress(req, ctx) {
      const { em } = requestOf(ctx, "public");
      const row = await inTransaction(em, (tx) => refunds.submitAddress(tx, req.token, req.address));
      if (!row) throw apiError("not_found", "No such refund.", "token");
      return { data: await claimOf(em, row) };
    },
  };
}
