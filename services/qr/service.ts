import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import { QrConfigurationSchema, QrService, type QrConfiguration } from "../../gen/payments/v1/qr_pb.ts";
import { apiError } from "../platform/errors.ts";
import { requestOf } from "../rpc/context.ts";
import { acceptedPairs, findActiveQr, qrIdPattern, type PublicQrRow } from "./store.ts";

/** The public view: only these facts, never the merchant's id or anything else of the row. */
export function qrView(row: PublicQrRow): QrConfiguration {
  return create(QrConfigurationSchema, {
    qrPublicId: row.id,
    label: row.label,
    merchantDisplayName: row.merchantName,
    environment: row.environment,
    accepted: acceptedPairs(row.network, row.asset),
    amount: row.amount ?? undefined,
  });
}

/** QrService: the public QR configuration route (no credential; the gateway limits it per client address). */
export function qrService(): ServiceImpl<typeof QrService> {
  return {
    async getQrConfiguration(req, ctx) {
      const { em } = requestOf(ctx, "public");
      // The shape first: an id that cannot exist is not found without a query.
      const row = qrIdPattern.test(req.qrPublicId) ? await findActiveQr(em, req.qrPublicId) : undefined;
      if (!row) throw apiError("not_found", "No such QR configuration.", "qr_public_id");
      return { data: qrView(row) };
    },
  };
}
