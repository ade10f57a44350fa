import type { Intents } from "../intents/intents.ts";
import { highestFixedConfirmations, type WatchWindow } from "../intents/store.ts";
import type { EntityManager } from "../platform/db.ts";
import { highestConfirmations } from "../policy/policy.ts";
import { assets } from "../vocabulary/assets.ts";
import type { Chain } from "./store.ts";

/**
 * How long the highest count fixed on open intents is reused. Safe to reuse: an intent created
 * since has a count no higher than the merchants' rules now (read fresh every time), so the
 * maximum of the two can only be behind if a rule was raised and lowered again within this time.
 */
const fixedReuseMs = 10_000;

/** Per chain, the highest count fixed on open intents and when it was read (a scan of the open intents). */
export type FixedCounts = Map<string, { value: number; at: number }>;

/**
 * The most confirmations an output of each asset of the chain can need to count: the default,
 * merchants' rules now, and the counts open intents were created with (a rule lowered or removed
 * since does not lower theirs).
 */
export async function requiredOnChain(
  em: EntityManager,
  intents: Intents,
  chain: Chain,
  watch: WatchWindow,
  reuse?: FixedCounts,
  o: { fresh?: boolean } = {},
): Promise<Record<string, number>> {
  const key = `${chain.network}/${chain.environment}`;
  const kept = reuse?.get(key);
  // `fresh`: read now whatever is kept (and kept for the reads that follow).
  let fixed = !o.fresh && kept && Date.now() - kept.at < fixedReuseMs ? kept.value : undefined;
  if (fixed === undefined) {
    fixed = await highestFixedConfirmations(em, chain, watch);
    reuse?.set(key, { value: fixed, at: Date.now() });
  }
  const highest = Math.max(await highestConfirmations(em, chain.environment, chain.network), fixed);
  const required: Record<string, number> = {};
  for (const a of assets.filter((a) => a.network === chain.network)) required[a.asset] = Math.max(intents.requiredConfirmations(a), highest);
  return required;
}
