import type { ServiceImpl } from "@connectrpc/connect";
import { TerminalService } from "../../gen/payments/v1/terminal_pb.ts";
import type { Intents } from "../intents/intents.ts";
import { validateCreate } from "../intents/validate.ts";
import { inTransaction, requestOf } from "../rpc/context.ts";

/** TerminalService: a cashier's counter payment is an ordinary intent, marked pos with its cashier and terminal. */
export function terminalService(deps: { intents: Intents }): ServiceImpl<typeof TerminalService> {
  const { intents } = deps;
  return {
    async createPosPayment(req, ctx) {
      const { principal, em } = requestOf(ctx, "cashier");
      const input = validateCreate({ ...req, merchant: "", metadata: {}, $typeName: "payments.v1.CreatePaymentIntentRequest" });
      const origin = { source: "pos" as const, cashier: principal.cashier, terminal: principal.terminal };
      const row = await inTransaction(em, (tx) => intents.create(tx, principal, input, origin));
      return { data: intents.views.message(row) };
    },
  };
}
