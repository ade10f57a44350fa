import type { ServiceImpl } from "@connectrpc/connect";
import { SandboxService } from "../../gen/payments/v1/sandbox_pb.ts";
import type { Intents } from "../intents/intents.ts";
import type { Refunds } from "../refunds/refunds.ts";
import { inTransaction, merchantRequest } from "../rpc/context.ts";
import { simulate, type Outcome } from "./simulate.ts";

/** SandboxService's handler (Test API keys only: the route option says so, the interceptor checks it). */
export function sandboxService(deps: { intents: Intents; refunds: Refunds }): ServiceImpl<typeof SandboxService> {
  const { intents, refunds } = deps;
  return {
    async simulatePaymentIntent(req, ctx) {
      const { principal, em } = merchantRequest(ctx);
      // One of simulateOutcomes: its field rules (one_of) were checked before this handler.
      const outcome = req.outcome as Outcome;
      const row = await inTransaction(em, (tx) => simulate(tx, intents, principal, req.publicId, outcome, req.amount));
      return { data: intents.views.message(row) };
    },

    async simulateRefund(req, ctx) {
      const { principal, em } = merchantRequest(ctx);
      const row = await inTransaction(em, (tx) => refunds.simulatePayment(tx, principal, req.refundId));
      return { data: refunds.views.message(row) };
    },
  };
}
