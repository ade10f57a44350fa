import type { Environment } from "../auth/keys.ts";
import { intentIdsByAddress, lockIntents } from "../intents/store.ts";
import type { EntityManager } from "../platform/db.ts";
import { settleMany } from "../observations/settle.ts";
import { intentsLeavingMempool, upsertMempoolOutputs, withdrawFromMempool, type MempoolOutputRow } from "../observations/store.ts";
import { bestTip } from "./blocks.ts";
import { changedOutput, checkEach, halted, keepRefused, lockAdmitted, type RefusedOutput, type ReportDeps, type ReportedOutput } from "./report.ts";

/**
 * The node's mempool as a watcher reads it: outputs to watched addresses with 0 confirmations and
 * no block, through the same rows as block outputs (an output is its transaction and its place in
 * it, so the block that mines it later moves the same row into the block). The report is the
 * whole mempool's matched set against a best tip: what the core recorded from the mempool and is
 * no longer in it, without having been mined, is withdrawn.
 */

export interface MempoolReport {
  epoch: number;
  tipHash: string;
  outputs: (ReportedOutput & { replaceable: boolean })[];
}

export interface MempoolOutcome {
  applied: boolean;
  added: number;
  withdrawn: number;
  rejected: number;
  settled: number;
}

export async function applyMempool(tx: EntityManager, deps: ReportDeps, chain: { network: string; environment: Environment }, r: MempoolReport, now = new Date()): Promise<MempoolOutcome> {
  const watcher = await lockAdmitted(tx, chain, { epoch: r.epoch, genesisHash: undefined });
  if (watcher.halted !== null) throw halted(chain, watcher.halted);
  // Read against another tip than the core's: a transaction missing from it may be in a block
  // the core has not been told of yet (it is not withdrawn), so nothing is applied.
  const tip = await bestTip(tx, chain);
  if (!tip || tip.hash !== r.tipHash) return { applied: false, added: 0, withdrawn: 0, rejected: 0, settled: 0 };

  const checked = checkEach(chain.network, r.outputs, (c, o): MempoolOutputRow => ({ ...c, outputIndex: o.outputIndex, replaceable: o.replaceable, intentId: null }));
  const outputs = checked.valid;
  const rejected: RefusedOutput[] = checked.refused.map(({ o, reason }) => ({ o, blockHash: null, reason }));
  const keep = [...outputs.keys()];
  const byAddress = await intentIdsByAddress(tx, chain, [...new Set([...outputs.values()].map((o) => o.toAddress))]);
  for (const o of outputs.values()) o.intentId = byAddress.get(o.toAddress) ?? null;
  // Every intent whose funds may change, locked in id order before any of its outputs changes.
  const locked = await lockIntents(tx, [...new Set([...byAddress.values(), ...(await intentsLeavingMempool(tx, chain, keep, deps.latePaymentWindowSeconds))])]);

  const withdrawn = await withdrawFromMempool(tx, chain, keep, deps.latePaymentWindowSeconds, now);
  const { conflicting, added } = await upsertMempoolOutputs(tx, chain, [...outputs.values()], now);
  for (const o of conflicting) rejected.push({ o, blockHash: null, reason: changedOutput(o) });
  const settled = await settleMany(tx, deps.intents, locked, now);
  await keepRefused(tx, chain, rejected);
  return { applied: true, added, withdrawn, rejected: rejected.length, settled: settled.length };
}
