import type { Environment } from "../auth/keys.ts";
import { intentIdsByAddress, lockIntents } from "../intents/store.ts";
import type { EntityManager } from "../platform/db.ts";
import { lockedNow } from "../platform/db-clock.ts";
import { settleMany } from "../intents/settle.ts";
import { intentOutputs, missingFromMempool } from "./outputs.ts";
import { markAbsentFromMempool, upsertMempoolOutputs, withdrawFromMempool, type MempoolOutputRow } from "./output-store.ts";
import { bestTip } from "./blocks.ts";
import { defaultMempoolAbsence, withdrawsFromMempool, type MempoolAbsenceRule } from "./mempool-rule.ts";
import { changedOutput, checkEach, halted, keepRefused, lockAdmitted, type RefusedOutput, type ReportedOutput, type Reporter } from "./admission.ts";
import type { ReportDeps } from "./report.ts";

/**
 * The node's mempool as a watcher reads it: outputs to watched addresses with 0 confirmations and
 * no block, through the same rows as block outputs (an output is its transaction and its place in
 * it, so the block that mines it later moves the same row into the block). The report is the
 * whole mempool's matched set against a best tip, read from a node that said its mempool was
 * loaded. What the core recorded from the mempool and is no longer in it, without having been
 * mined, is withdrawn for a reason only (mempool-rule.ts): at once when the watcher saw a
 * conflicting spend, else once missing from enough reports over long enough.
 */

export interface MempoolReport extends Reporter {
  epoch: number;
  tipHash: string;
  outputs: (ReportedOutput & { replaceable: boolean })[];
  /** Transactions that left the mempool because another spent one of their inputs. */
  conflicted: string[];
}

export interface MempoolDeps extends ReportDeps {
  /** MEMPOOL_ABSENT_READS / MEMPOOL_ABSENT_SECONDS (default 3 and 60). */
  mempoolAbsence?: MempoolAbsenceRule;
}

export interface MempoolOutcome {
  applied: boolean;
  added: number;
  withdrawn: number;
  /** Outputs missing from the report and not withdrawn (yet). */
  absent: number;
  rejected: number;
  settled: number;
}

export async function applyMempool(tx: EntityManager, deps: MempoolDeps, chain: { network: string; environment: Environment }, r: MempoolReport, now = new Date()): Promise<MempoolOutcome> {
  const watcher = await lockAdmitted(tx, chain, { epoch: r.epoch, genesisHash: undefined, watcherId: r.watcherId, credentialId: r.credentialId });
  if (watcher.halted !== null) throw halted(chain, watcher.halted);
  // Read against another tip than the core's: a transaction missing from it may be in a block
  // the core has not been told of yet (it is not withdrawn), so nothing is applied.
  const tip = await bestTip(tx, chain);
  if (!tip || tip.hash !== r.tipHash) return { applied: false, added: 0, withdrawn: 0, absent: 0, rejected: 0, settled: 0 };

  const checked = checkEach(chain.network, r.outputs, (c, o): MempoolOutputRow => ({ ...c, outputIndex: o.outputIndex, replaceable: o.replaceable, intentId: null }));
  const outputs = checked.valid;
  const rejected: RefusedOutput[] = checked.refused.map(({ o, reason }) => ({ o, blockHash: null, reason }));
  const keep = [...outputs.keys()];
  const byAddress = await intentIdsByAddress(tx, chain, [...new Set([...outputs.values()].map((o) => o.toAddress))]);
  for (const o of outputs.values()) o.intentId = byAddress.get(o.toAddress) ?? null;
  const missing = await missingFromMempool(tx, chain, keep, deps.watch);
  const conflicted = new Set(r.conflicted);
  const rule = deps.mempoolAbsence ?? defaultMempoolAbsence;
  const leaving = missing.filter((o) => withdrawsFromMempool({ conflicted: conflicted.has(o.txHash), absentSince: o.absentSince, absentReads: o.absentReads }, now, rule));
  const staying = missing.filter((o) => !leaving.includes(o));
  // Every intent whose outputs change, locked in id order before any of them changes.
  const intents = [...byAddress.values(), ...missing.flatMap((o) => (o.intentId === null ? [] : [o.intentId]))];
  const locked = await lockIntents(tx, [...new Set(intents)]);
  // Payments are recorded at this moment, the intents held (as a block report's, report.ts): one
  // recorded after a cancel that committed while the report waited never counts. An absence is
  // timed by the report's own time, `now`, the nearest the core has to when the mempool was read.
  const at = await lockedNow(tx);

  await markAbsentFromMempool(tx, staying.map((o) => o.id), now);
  const withdrawn = await withdrawFromMempool(tx, leaving.map((o) => o.id), now);
  const { conflicting, added } = await upsertMempoolOutputs(tx, chain, [...outputs.values()], at);
  for (const o of conflicting) rejected.push({ o, blockHash: null, reason: changedOutput(o) });
  const settled = await settleMany(tx, deps.intents, intentOutputs, locked, at);
  await keepRefused(tx, chain, rejected);
  return { applied: true, added, withdrawn, absent: staying.length, rejected: rejected.length, settled: settled.length };
}
