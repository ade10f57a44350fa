import type { Intents } from "../intents/intents.ts";
import { highestFixedConfirmations } from "../intents/store.ts";
import type { EntityManager } from "../platform/db.ts";
import { highestConfirmations } from "../policy/policy.ts";
import { assets } from "../vocabulary/assets.ts";
import type { Chain } from "./store.ts";

/**
 * The most confirmations an output of each asset of the chain can need to count: the default,
 * merchants' rules now, and the counts open intents were created with (a rule lowered or removed
 * since does not lower theirs).
 */
export async function requiredOnChain(em: EntityManager, intents: Intents, chain: Chain, latePaymentWindowSeconds: number): Promise<Record<string, number>> {
  const highest = Math.max(await highestConfirmations(em, chain.environment, chain.network), await highestFixedConfirmations(em, chain, latePaymentWindowSeconds));
  const required: Record<string, number> = {};
  for (const a of assets.filter((a) => a.network === chain.network)) required[a.asset] = Math.max(intents.requiredConfirmations(a), highest);
  return required;
}
