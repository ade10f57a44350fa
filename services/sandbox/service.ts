import type { ServiceImpl } from "@connectrpc/connect";
import { SandboxService } from "../../gen/payments/v1/sandbox_pb.ts";
import type { Intents } from "../intents/intents.ts";
import { validationError } from "../platform/errors.ts";
import { inTransaction, merchantRequest } from "../rpc/context.ts";
import { isOutcome, outcomes, simulate } from "./simulate.ts";

/** SandboxService's handler (Test API keys only: the route option says so, the interceptor checks it). */
export function sandboxService(deps: { intents: Intents }): ServiceImpl<typeof SandboxService> {
  const { intents } = deps;
  return {
    async simulatePaymentIntent(req, ctx) {
      const { principal, em } = merchantRequest(ctx);
      if (req.outcome === "") throw validationError("outcome", `"outcome" is missing or empty: one of ${outcomes.join(", ")}.`);
      if (!isOutcome(req.outcome)) throw validationError("outcome", `"outcome" must be one of ${outcomes.join(", ")}.`);
      const outcome = req.outcome;
      const row = await inTransaction(em, (tx) => simulate(tx, intents, principal, req.publicId, outcome, req.amount));
      return { data: intents.views.message(row) };
    },
  };
}
