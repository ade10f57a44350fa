import type { Environment } from "../auth/keys.ts";
import { intentIdsByAddress, lockIntents } from "../intents/store.ts";
import { describeError } from "../platform/errors.ts";
import type { EntityManager } from "../platform/db.ts";
import { settleMany } from "../observations/settle.ts";
import { intentsLeavingMempool, recordRejection, upsertMempoolOutputs, withdrawFromMempool, type MempoolOutputRow } from "../observations/store.ts";
import { checkOutput } from "../observations/validate.ts";
import { bestTip } from "./blocks.ts";
import { refusal, type ReportDeps, type ReportedOutput } from "./report.ts";

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
  const [row] = await tx.execute<{ epoch: string | number }[]>(`select epoch from chain_watchers where network = ? and environment = ? for update`, [
    chain.network,
    chain.environment,
  ]);
  if (!row || Number(row.epoch) !== r.epoch) {
    throw refusal("stale_epoch", `Lease epoch ${r.epoch} of ${chain.network} (${chain.environment}) has passed: another watcher took the chain over; claim it again.`);
  }
  // Read against another tip than the core's: a transaction missing from it may be in a block
  // the core has not been told of yet (it is not withdrawn), so nothing is applied.
  const tip = await bestTip(tx, chain);
  if (!tip || tip.hash !== r.tipHash) return { applied: false, added: 0, withdrawn: 0, rejected: 0, settled: 0 };

  const rejected: { o: ReportedOutput; reason: string }[] = [];
  const outputs = new Map<string, MempoolOutputRow>();
  for (const o of r.outputs) {
    try {
      const checked = checkOutput(chain.network, o);
      outputs.set(`${checked.txHash}:${o.outputIndex}`, { ...checked, outputIndex: o.outputIndex, replaceable: o.replaceable, intentId: null });
    } catch (err) {
      const view = describeError(err);
      if (view.code !== "validation_failed") throw err;
      rejected.push({ o, reason: `${view.param ?? "output"}: ${view.message}` });
    }
  }
  const keep = [...outputs.keys()];
  const byAddress = await intentIdsByAddress(tx, chain, [...new Set([...outputs.values()].map((o) => o.toAddress))]);
  for (const o of outputs.values()) o.intentId = byAddress.get(o.toAddress) ?? null;
  // Every intent whose funds may change, locked in id order before any of its outputs changes.
  const locked = await lockIntents(tx, [...new Set([...byAddress.values(), ...(await intentsLeavingMempool(tx, chain, keep))])]);

  const withdrawn = await withdrawFromMempool(tx, chain, keep, now);
  const { conflicting, added } = await upsertMempoolOutputs(tx, chain, [...outputs.values()], now);
  for (const o of conflicting) {
    rejected.push({ o, reason: `tx_hash: Output ${o.txHash}:${o.outputIndex} was recorded with another address, asset or amount; an output never changes.` });
  }
  const settled = await settleMany(tx, deps.intents, locked, now);
  for (const x of rejected) {
    await recordRejection(tx, { network: chain.network, environment: chain.environment, ...x.o, blockHash: null, reason: x.reason });
  }
  return { applied: true, added, withdrawn, rejected: rejected.length, settled: settled.length };
}
