import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import { GoLiveReadinessSchema, ReadinessService } from "../../gen/payments/v1/readiness_pb.ts";
import { merchantRequest } from "../rpc/context.ts";
import { evaluate, readFacts, type RatesFreshness } from "./checks.ts";

export interface ReadinessDeps {
  readiness: {
    /** PUBLIC_BASE_URL: the curl commands in the messages call it. */
    publicBaseUrl: string;
    /** API_KEY_MAX_AGE_DAYS. */
    apiKeyMaxAgeDays: number;
    /** Whether fiat-priced creates would be quoted now (the rate engine), per environment. */
    rates?: (environment: "test" | "live") => RatesFreshness;
    /** OPERATOR_WATCHED_NETWORKS: networks a watcher of the operator's own follows. */
    operatorWatchedNetworks?: readonly string[];
  };
}

/** ReadinessService: the go-live checks of the API key's merchant and environment (reads only). */
export function readinessService(deps: ReadinessDeps): ServiceImpl<typeof ReadinessService> {
  const { publicBaseUrl, apiKeyMaxAgeDays, rates, operatorWatchedNetworks } = deps.readiness;
  return {
    async getGoLiveReadiness(_req, ctx) {
      const { principal, em } = merchantRequest(ctx);
      const facts = await readFacts(em, { merchantId: principal.merchantId, environment: principal.environment });
      const result = evaluate(facts, { publicBaseUrl, apiKeyMaxAgeDays, now: new Date(), rates, operatorWatchedNetworks });
      return { data: create(GoLiveReadinessSchema, result) };
    },
  };
}
