import type { ServiceImpl } from "@connectrpc/connect";
import { fromJson } from "@bufbuild/protobuf";
import { WebhookEventSchema, WebhookService } from "../../gen/payments/v1/webhooks_pb.ts";
import { WebhookEventRecord } from "../events/entities.ts";
import { apiError } from "../platform/errors.ts";
import { merchantScope } from "../rpc/context.ts";

export function webhookService(): ServiceImpl<typeof WebhookService> {
  return {
    async getWebhookEvent(req, ctx) {
      const { principal, em } = merchantScope(ctx);
      const event = await em.findOne(
        WebhookEventRecord,
        { id: req.eventId, merchant: principal.merchantId, environment: principal.environment },
        { fields: ["payload"] },
      );
      if (!event) throw apiError("not_found", `No webhook event ${req.eventId}.`, "event_id");
      // The stored bytes are the envelope as delivered; the message carries the same JSON.
      return { data: fromJson(WebhookEventSchema, JSON.parse(event.payload)) };
    },
  };
}
