import type { ServiceImpl } from "@connectrpc/connect";
import { ApiKeyService } from "../../gen/payments/v1/api_keys_pb.ts";
import { merchantRequest } from "../rpc/context.ts";

/** ApiKeyService's handler: what the calling key is, never its secret. */
export function apiKeyService(): ServiceImpl<typeof ApiKeyService> {
  return {
    async getCurrentApiKey(_req, ctx) {
      const { principal } = merchantRequest(ctx);
      return { data: { id: principal.keyId, merchant: principal.merchantId, environment: principal.environment, scopes: [...principal.scopes].sort() } };
    },
  };
}
