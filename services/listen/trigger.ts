import { call, type Api } from "./api.ts";

/** What makes each event happen: a Test intent created, then what the sandbox does to it. */
// payment.valued needs a rate outage to pass (a payment seen while no rate is fresh): not here.
const recipes: Record<string, { steps: string[]; cancel?: boolean; priced?: boolean }> = {
  "payment.intent.created": { steps: [] },
  "payment.detected": { steps: ["detected"] },
  "payment.confirmed": { steps: ["confirmed"] },
  "payment.underpaid": { steps: ["underpaid"] },
  "payment.overpaid": { steps: ["overpaid"] },
  "payment.expired": { steps: ["expired"] },
  "payment.late": { steps: ["late"] },
  "payment.reorged": { steps: ["confirmed", "reorged"] },
  "payment.exception": { steps: ["wrong_asset"] },
  "payment.cancelled": { steps: [], cancel: true },
  // Priced at 10.00 USD, its quote lapsed: the server's requote sweep records it within a second.
  "payment.requoted": { steps: ["quote_lapsed"], priced: true },
};

export const triggerable = Object.keys(recipes);

/**
 * Makes `type` happen for real in Test: an intent created through the API and driven by the
 * sandbox (SandboxService), so the event is recorded as any other and reaches endpoints and
 * listeners alike. Returns what was done, one line each.
 */
export async function trigger(api: Api, merchant: string, type: string): Promise<string[]> {
  const recipe = recipes[type];
  if (!recipe) throw new Error(`"${type}" cannot be triggered; these can: ${triggerable.join(", ")}. (webhook.test: POST …/webhook-endpoints/{id}/test; payment.valued comes with a rate outage.)`);
  const base = `/api/v1/merchants/${merchant}`;
  const amount = recipe.priced ? { price_amount: "10.00", price_currency: "USD" } : { requested_amount: "10.00" };
  const body = { network: "ethereum", asset: "USDC", ...amount, merchant_reference: `listen trigger ${type}` };
  const created = await call<{ data: { public_id: string; requested_amount: string } }>(api, "POST", `${base}/payment-intents`, body, true);
  const id = created.data.public_id;
  const done = [`created ${id} (${created.data.requested_amount} USDC on ethereum${recipe.priced ? ", priced at 10.00 USD" : ""}, Test)`];
  for (const outcome of recipe.steps) {
    const after = await call<{ data: { status: string } }>(api, "POST", `/api/v1/sandbox/merchants/${merchant}/payment-intents/${id}/simulate`, { outcome });
    done.push(`simulated ${outcome}: ${id} is ${after.data.status}`);
  }
  if (recipe.cancel) {
    await call(api, "POST", `${base}/payment-intents/${id}/cancel`);
    done.push(`cancelled ${id}`);
  }
  return done;
}
