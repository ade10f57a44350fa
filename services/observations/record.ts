import { randomBytes } from "node:crypto";
import { isEvmNetwork } from "../vocabulary/assets.ts";
import type { Intents } from "../intents/intents.ts";
import { lockIntentByAddress, lockIntents, type IntentRow } from "../intents/store.ts";
import type { Environment } from "../auth/keys.ts";
import type { EntityManager } from "../platform/db.ts";
import { lockedNow } from "../platform/db-clock.ts";
import { settle } from "../intents/settle.ts";
import { intentOutputs, intentsWithOutputsIn } from "../chains/outputs.ts";
import { setOrphaned, upsertObservation, type ObservationInput, type ObservationRow } from "../chains/output-store.ts";

/**
 * Chain facts in: the chain watcher (ObservationService) and the sandbox
 * simulator call these, and only these, to change what an intent has received.
 */

export interface Recorded {
  observation: ObservationRow;
  intent: IntentRow | undefined;
}

/**
 * Records one output (validated by the caller) and settles the intent whose address received
 * it. The intent's row lock is taken first, so observations, reorgs and the scheduler racing
 * on one intent are applied one after another: nothing is lost and nothing emitted twice. The
 * output is recorded at the moment the lock is held (a cancel that committed meanwhile came
 * first), unless the caller, holding it already, gives its own `now` (the sandbox's).
 */
export async function recordObservation(tx: EntityManager, intents: Intents, o: ObservationInput, simulated: boolean, given?: Date): Promise<Recorded> {
  const intent = await lockIntentByAddress(tx, o.network, o.environment, o.toAddress);
  const now = given ?? (await lockedNow(tx));
  // One recorded with another address, asset or amount is refused there, changing nothing.
  const observation = await upsertObservation(tx, o, intent?.id ?? null, simulated, now);
  if (!intent) return { observation, intent: undefined };
  const settled = await settle(tx, intents, intentOutputs, intent, now);
  // Settlement decided whether it counts.
  const fact = settled.transactions?.find((t) => t.txHash === o.txHash && t.outputIndex === o.outputIndex);
  return { observation: { ...observation, counted: fact?.counted ?? false }, intent: settled };
}

/** Funds in the given blocks or transactions stop counting; the intents they paid are settled again. */
export async function recordReorg(
  tx: EntityManager,
  intents: Intents,
  network: string,
  environment: Environment,
  blockHashes: readonly string[],
  txHashes: readonly string[],
  given?: Date,
): Promise<{ orphaned: number; intents: IntentRow[] }> {
  // Lock the intents before touching their outputs, in the order every other path locks them.
  const chain = { network, environment };
  const places = { blocks: blockHashes, txs: txHashes };
  const ids = await intentsWithOutputsIn(tx, chain, places, true);
  const locked = await lockIntents(tx, ids);
  // Like an observation: its settlement's time is when it holds the intents.
  const now = given ?? (await lockedNow(tx));
  // An operator's confirmations are its own: an orphaned output keeps the last it told.
  const orphaned = await setOrphaned(tx, chain, places, true, now, { keepConfirmations: true });
  const settled: IntentRow[] = [];
  for (const row of locked) settled.push(await settle(tx, intents, intentOutputs, row, now));
  return { orphaned, intents: settled };
}

/** A synthetic transaction hash for the sandbox, written as the network writes its own: 64 hex digits, with 0x on EVM chains. */
export function simulatedTxHash(network: string): string {
  const hex = randomBytes(32).toString("hex");
  return isEvmNetwork(network) ? `0x${hex}` : hex;
}
