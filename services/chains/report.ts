import type { Environment } from "../auth/keys.ts";
import type { Intents } from "../intents/intents.ts";
import { intentIdsByAddress, lockIntents, type WatchWindow } from "../intents/store.ts";
import { apiError } from "../platform/errors.ts";
import type { EntityManager } from "../platform/db.ts";
import { lockedNow } from "../platform/db-clock.ts";
import { settleMany } from "../intents/settle.ts";
import { intentsAwaitingConfirmations, intentOutputs, intentsReachingConfirmations, intentsWithOutputsIn } from "./outputs.ts";
import { deriveConfirmations, setOrphaned, upsertBlockOutputs, type BlockOutput } from "./output-store.ts";
import { changedOutput, checkEach, halted, keepRefused, lockAdmitted, refusal, type RefusedOutput, type ReportedOutput, type Reporter } from "./admission.ts";
import { assets } from "../vocabulary/assets.ts";
import { allBest, bestFrom, bestTip, joinBest, keepSide, keptDepth, leaveBest, pruneBlocks, rejoinBest, sideBranchTo, type StoredBlock } from "./blocks.ts";
import { link } from "./linkage.ts";
import { requiredOnChain, type FixedCounts } from "./required.ts";

/**
 * The one place where chain facts from a watcher change what intents received: blocks are linked
 * to the best chain the core keeps, outputs recorded against their block, confirmations derived
 * from the best chain, and every intent touched settled, in one transaction.
 */

export interface BlockReport extends Reporter {
  epoch: number;
  genesisHash: string | undefined;
  blocks: { height: number; hash: string; parentHash: string; time: Date | undefined; work: bigint | undefined; outputs: ReportedOutput[] }[];
  head: { height: number; time: Date | undefined };
  /** The watcher did not find where the node's chain parts from the one reported: the first block's parent is only as far down as it could read (a fork measured from there is a lower bound). */
  forkPointUnknown?: boolean;
}

export interface ReportOutcome {
  tip: StoredBlock | undefined;
  appended: number;
  orphaned: number;
  rejected: number;
  settled: number;
  /** Why the chain stopped: the report would have taken more blocks off the best chain than the network's maximum (committed, then refused). */
  halted?: string;
}

export interface ReportDeps {
  intents: Intents;
  /** How long an intent's address is still watched once it can no longer be paid on time. */
  watch: WatchWindow;
  /** The highest counts fixed on open intents, reused between reports (required.ts says why that is safe). */
  fixedCounts?: FixedCounts;
  /** How many best blocks a fork may take away on the network before its chain stops (<NETWORK>_MAX_REORG_DEPTH). */
  maxReorgDepth(network: string): number;
  /**
   * Settles what the report changed beyond intents, in its transaction, after them: the refunds
   * whose addresses the watchers follow (services/refunds, wired by the app; this domain does not
   * know refunds).
   */
  settleOthers?: (tx: EntityManager, chain: { network: string; environment: Environment }, at: Date) => Promise<void>;
}

/** The confirmations an output of each asset of the network needs when its intent fixed none. */
function defaultConfirmations(intents: Intents, network: string): Record<string, number> {
  return Object.fromEntries(assets.filter((a) => a.network === network).map((a) => [a.asset, intents.requiredConfirmations(a)]));
}

export async function applyReport(tx: EntityManager, deps: ReportDeps, chain: { network: string; environment: Environment }, r: BlockReport, now = new Date()): Promise<ReportOutcome> {
  const watcher = await lockAdmitted(tx, chain, r);
  if (watcher.halted !== null) throw halted(chain, watcher.halted);

  const tip = await bestTip(tx, chain);
  const first = r.blocks[0];
  if (!first) {
    // A heartbeat: the node's head, and that the watcher is alive.
    await tx.execute(`update chain_watchers set head_height = ?, head_time = ?, saved_at = now() where network = ? and environment = ?`, [
      r.head.height,
      r.head.time ?? null,
      chain.network,
      chain.environment,
    ]);
    return { tip, appended: 0, orphaned: 0, rejected: 0, settled: 0 };
  }
  const sideBelow = tip ? await sideBranchTo(tx, chain, first.parentHash) : [];
  const best = tip ? await bestFrom(tx, chain, Math.min(first.height, sideBelow?.[0]?.height ?? first.height) - 1) : new Map<number, string>();
  const maxDepth = deps.maxReorgDepth(chain.network);
  // A resume takes only the fork it was given for: a branch holding the halted branch's lowest block.
  const branch = [...(sideBelow ?? []), ...r.blocks];
  const resumed = watcher.acceptReorg && (watcher.acceptBranch === null || branch.some((b) => b.height === watcher.acceptBranch?.height && b.hash === watcher.acceptBranch.hash));
  // A batch up to the node's head is the node's whole best chain: by height (EVM), taken even if lower.
  const toNodeHead = (r.blocks.at(-1) as { height: number }).height === r.head.height;
  const linkage = link(r.blocks, { tip, best, sideBelow, maxDepth, acceptDeeper: resumed, forkPointUnknown: r.forkPointUnknown === true, toNodeHead });
  if (linkage.kind === "unlinked") throw refusal("unlinked", linkage.reason);
  if (linkage.kind === "malformed") throw apiError("validation_failed", `The blocks are not consecutive: ${linkage.reason}.`, "blocks");
  if (linkage.kind === "halt") {
    // Kept, not thrown: the halt must outlive this report (the caller refuses it after the commit).
    const reason = `${linkage.reason}: counting stopped until an operator resumes the chain (ops chain-resume)`;
    // The branch's lowest block (just above where it parts) names the fork a resume is for; a
    // resume still armed was for another fork, and is spent.
    const lowest = branch.find((b) => b.height === linkage.forkHeight + 1);
    await tx.execute(
      `update chain_watchers set halted_depth = ?, halted_depth_is_lower_bound = ?, halted_at = ?, halted_reason = ?, halted_branch_height = ?, halted_branch_hash = ?, accept_reorg = false
        where network = ? and environment = ?`,
      [linkage.depth, linkage.atLeast, now, reason.slice(0, 500), lowest?.height ?? null, lowest?.hash ?? null, chain.network, chain.environment],
    );
    return { tip, appended: 0, orphaned: 0, rejected: 0, settled: 0, halted: reason };
  }

  // Outputs: each checked on its own; one the core cannot take is kept as rejected, the rest go on.
  const checked = checkEach(
    chain.network,
    r.blocks.flatMap((b) => b.outputs.map((o) => ({ ...o, block: b }))),
    (c, o): BlockOutput => ({ ...c, outputIndex: o.outputIndex, blockHeight: o.block.height, blockHash: o.block.hash, observedAt: o.block.time ?? now, intentId: null, rawTransaction: o.rawTransaction }),
  );
  const rejected: RefusedOutput[] = checked.refused.map(({ o, reason }) => ({ o, blockHash: o.block.hash, reason }));
  const blockRow = (b: { height: number; hash: string; parentHash: string; time: Date | undefined; work?: bigint | undefined }) => ({ height: b.height, hash: b.hash, parentHash: b.parentHash, time: b.time, work: b.work });

  if (linkage.kind === "side") {
    // A branch told in parts: nothing counts differently until it beats the best chain.
    const keep = new Set(linkage.keep.map((b) => b.hash));
    const byBlock = new Map<string, unknown[]>();
    for (const o of checked.valid.values()) byBlock.set(o.blockHash, [...(byBlock.get(o.blockHash) ?? []), sideOutput(o)]);
    await keepSide(tx, chain, r.blocks.filter((b) => keep.has(b.hash)).map((b) => ({ ...blockRow(b), outputs: byBlock.get(b.hash) ?? [] })), now);
    await keepRefused(tx, chain, rejected);
    await saveHead(tx, chain, r, tip?.height ?? first.height - 1);
    return { tip, appended: 0, orphaned: 0, rejected: rejected.length, settled: 0 };
  }

  const newTip = linkage.tip;
  const required = await requiredOnChain(tx, deps.intents, chain, deps.watch, deps.fixedCounts);
  // Outputs this far below the tip have every confirmation they can need: those above it, as of
  // the tip before this report (a catch-up batch moves the tip far) and after it, get theirs anew,
  // and so do those of every block that joins the best chain, however deep.
  const depth = Math.max(1, ...Object.values(required)) + 1;
  const below = Math.min(tip?.height ?? first.height - 1, newTip.height) - depth;

  // A side branch that won brings the outputs reported in its blocks before.
  const outputs = checked.valid;
  for (const b of sideBelow ?? []) for (const raw of b.outputs) {
    const o = fromSideOutput(raw);
    outputs.set(`${o.txHash}:${o.outputIndex}`, o);
  }

  // Every intent whose funds may change, locked in id order before any of its outputs changes.
  const byAddress = await intentIdsByAddress(tx, chain, [...new Set([...outputs.values()].map((o) => o.toAddress))]);
  for (const o of outputs.values()) o.intentId = byAddress.get(o.toAddress) ?? null;
  const leave = linkage.restart ? await allBest(tx, chain) : linkage.leave;
  const joining = [...linkage.rejoin, ...linkage.append.map((b) => b.hash)];
  const touched = new Set<string>([
    ...byAddress.values(),
    ...(await intentsWithOutputsIn(tx, chain, { blocks: [...leave, ...joining] }, false)),
    // After a fork any output's count may have gone down; else only those that reach theirs matter.
    ...(leave.length > 0
      ? await intentsAwaitingConfirmations(tx, chain, below, true)
      : await intentsReachingConfirmations(tx, chain, newTip.height, below, defaultConfirmations(deps.intents, chain.network))),
  ]);
  const locked = await lockIntents(tx, [...touched]);
  // What changes from here is recorded at this moment, the intents held: a cancel that committed
  // while the report waited (for the chain's row or an intent's) came before its payments, which
  // then never count (intent_cancelled). `now`, when the report came, stays the time of what no
  // intent's lock orders: a halt, side blocks, the time of an output whose block has none.
  const at = await lockedNow(tx);

  await leaveBest(tx, chain, leave);
  const orphaned = await setOrphaned(tx, chain, { blocks: leave }, true, at);
  const byHash = new Map(r.blocks.map((b) => [b.hash, b]));
  await rejoinBest(tx, chain, linkage.rejoin);
  await joinBest(tx, chain, linkage.append.map((b) => blockRow(byHash.get(b.hash) ?? { ...b, time: undefined })), at);
  // A block that comes back brings its outputs back, reported again or not (an intent no longer watched).
  await setOrphaned(tx, chain, { blocks: joining }, false, at);
  const changed = await upsertBlockOutputs(tx, chain, [...outputs.values()], { tip: newTip.height, blocks: new Set(joining) }, at);
  for (const o of changed) rejected.push({ o, blockHash: o.blockHash, reason: changedOutput(o) });
  await deriveConfirmations(tx, chain, newTip.height, below, joining, at);

  await settleMany(tx, deps.intents, intentOutputs, locked, at);
  await deps.settleOthers?.(tx, chain, at);
  await keepRefused(tx, chain, rejected);

  // A resume is spent when the best chain next changes: by the fork it was given for, or by
  // blocks that go on without it (the watcher put back on a node on the kept chain). Left armed,
  // it would take any later deep fork, weeks on, without a halt.
  await tx.execute(
    `update chain_watchers set height = ?, head_height = ?, head_time = ?, saved_at = now(), genesis_hash = coalesce(?, genesis_hash),
            accept_reorg = accept_reorg and not ?
      where network = ? and environment = ?`,
    [newTip.height, r.head.height, r.head.time ?? null, r.genesisHash ?? null, joining.length > 0 || leave.length > 0, chain.network, chain.environment],
  );
  if (joining.length > 0) await pruneBlocks(tx, chain, newTip.height - keptDepth);
  return { tip: newTip, appended: joining.length, orphaned, rejected: rejected.length, settled: locked.length };
}

/** The node's head and that the watcher is alive, with the core's tip unchanged. */
async function saveHead(tx: EntityManager, chain: { network: string; environment: Environment }, r: BlockReport, height: number): Promise<void> {
  await tx.execute(`update chain_watchers set height = ?, head_height = ?, head_time = ?, saved_at = now() where network = ? and environment = ?`, [
    height,
    r.head.height,
    r.head.time ?? null,
    chain.network,
    chain.environment,
  ]);
}

/** An output of a side block as kept with it (JSON), and back. */
function sideOutput(o: BlockOutput): unknown {
  return { ...o, observedAt: o.observedAt.toISOString(), intentId: null };
}
function fromSideOutput(raw: unknown): BlockOutput {
  const o = raw as BlockOutput & { observedAt: string };
  return { ...o, observedAt: new Date(o.observedAt), intentId: null };
}
