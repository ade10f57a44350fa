import type { Environment } from "../auth/keys.ts";
import type { Intents } from "../intents/intents.ts";
import { intentIdsByAddress, lockIntents, type WatchWindow } from "../intents/store.ts";
import { apiError, describeError } from "../platform/errors.ts";
import type { EntityManager } from "../platform/db.ts";
import { lockedNow } from "../platform/db-clock.ts";
import { settleMany } from "../intents/settle.ts";
import {
  deriveConfirmations,
  intentsAwaitingConfirmations,
  intentOutputs,
  intentsInBlocks,
  intentsReachingConfirmations,
  recordRejection,
  setOrphaned,
  upsertBlockOutputs,
  type BlockOutput,
} from "./outputs.ts";
import { checkOutput } from "./validate.ts";
import { assets, mainnetGenesis } from "../vocabulary/assets.ts";
import { allBest, bestFrom, bestTip, forgetChain, joinBest, keepSide, keptDepth, leaveBest, pruneBlocks, rejoinBest, sideBranchTo, type StoredBlock } from "./blocks.ts";
import { admit, link } from "./linkage.ts";
import { requiredOnChain, type FixedCounts } from "./required.ts";

/**
 * The one place where chain facts from a watcher change what intents received: blocks are linked
 * to the best chain the core keeps, outputs recorded against their block, confirmations derived
 * from the best chain, and every intent touched settled, in one transaction.
 */

export interface ReportedOutput {
  asset: string;
  toAddress: string;
  txHash: string;
  outputIndex: number;
  amount: string;
}

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
}

/** The confirmations an output of each asset of the network needs when its intent fixed none. */
function defaultConfirmations(intents: Intents, network: string): Record<string, number> {
  return Object.fromEntries(assets.filter((a) => a.network === network).map((a) => [a.asset, intents.requiredConfirmations(a)]));
}

/** A report the core refuses, changing nothing: why, and what the watcher should do about it. */
export function refusal(kind: "stale_epoch" | "not_holder" | "unlinked" | "other_chain", message: string) {
  return apiError("invalid_state", message, kind === "stale_epoch" || kind === "not_holder" ? "lease_epoch" : kind === "other_chain" ? "genesis_hash" : "blocks");
}

/** Who sends a report: the watcher id and the credential it came with (the lease's holder, or refused). */
export interface Reporter {
  watcherId: string;
  credentialId: string;
}

/**
 * Locks the chain's row (reports of one chain apply one after another, and a takeover waits) and
 * admits the report, or refuses it changing nothing: only the lease holder's (its watcher id,
 * under the credential that claimed it, before the lease lapses) of its current epoch. A report
 * with another block 0 on Test starts the chain over: what was recorded on the old one keeps its state.
 */
export async function lockAdmitted(
  tx: EntityManager,
  chain: { network: string; environment: Environment },
  r: { epoch: number; genesisHash: string | undefined; blocks?: readonly unknown[] } & Reporter,
): Promise<{ halted: string | null; acceptReorg: boolean; acceptBranch: { height: number; hash: string } | null }> {
  const [row] = await tx.execute<
    {
      epoch: string | number;
      genesis_hash: string | null;
      holder: string;
      credential_id: string | null;
      lease_live: boolean;
      halted_reason: string | null;
      accept_reorg: boolean;
      accept_reorg_height: string | number | null;
      accept_reorg_hash: string | null;
    }[]
  >(
    // A resume past its time is no resume (the database's clock, as for the lease).
    `select epoch, genesis_hash, holder, credential_id, lease_expires_at > now() as lease_live, halted_reason,
            accept_reorg and coalesce(accept_reorg_until > now(), false) as accept_reorg, accept_reorg_height, accept_reorg_hash
       from chain_watchers where network = ? and environment = ? for update`,
    [chain.network, chain.environment],
  );
  const mainnet = (mainnetGenesis as Readonly<Record<string, string>>)[chain.network];
  const admitted = admit(
    row && { epoch: Number(row.epoch), genesisHash: row.genesis_hash, holder: row.holder, credentialId: row.credential_id, leaseLive: row.lease_live },
    { ...r, blocks: r.blocks?.length },
    chain.environment,
    mainnet,
  );
  if (admitted.kind === "stale_epoch") {
    throw refusal("stale_epoch", `Lease epoch ${r.epoch} of ${chain.network} (${chain.environment}) has passed: another watcher took the chain over; claim it again.`);
  }
  if (admitted.kind === "not_holder") {
    throw refusal("not_holder", `Watcher ${r.watcherId} does not hold the lease on ${chain.network} (${chain.environment}): ${admitted.why}; claim it again.`);
  }
  if (admitted.kind === "other_chain") {
    throw refusal(
      "other_chain",
      r.genesisHash === undefined
        ? `A report of blocks on ${chain.network} (live) must name block 0 (genesis_hash): Live counts only on mainnet, whose block 0 is ${mainnet}.`
        : `The report is of a chain whose block 0 is ${r.genesisHash}, not ${chain.network} mainnet's (${mainnet}).`,
    );
  }
  if (admitted.newChain) await forgetChain(tx, chain);
  const acceptBranch = row && row.accept_reorg_height !== null && row.accept_reorg_hash !== null ? { height: Number(row.accept_reorg_height), hash: row.accept_reorg_hash } : null;
  return { halted: row?.halted_reason ?? null, acceptReorg: row?.accept_reorg === true, acceptBranch };
}

/** An output refused, with where it was reported (its block; null: the mempool) and why. */
export interface RefusedOutput {
  o: ReportedOutput;
  blockHash: string | null;
  reason: string;
}

/** Each output checked on its own: the ones the core can take, by transaction and index, made into rows by `row`; why the others are refused. */
export function checkEach<O extends ReportedOutput, R>(
  network: string,
  outputs: readonly O[],
  row: (checked: ReturnType<typeof checkOutput>, o: O) => R,
): { valid: Map<string, R>; refused: { o: O; reason: string }[] } {
  const valid = new Map<string, R>();
  const refused: { o: O; reason: string }[] = [];
  for (const o of outputs) {
    try {
      const checked = checkOutput(network, o);
      valid.set(`${checked.txHash}:${o.outputIndex}`, row(checked, o));
    } catch (err) {
      const view = describeError(err);
      if (view.code !== "validation_failed") throw err;
      refused.push({ o, reason: `${view.param ?? "output"}: ${view.message}` });
    }
  }
  return { valid, refused };
}

/** Why an output already recorded with another address, asset or amount is refused. */
export function changedOutput(o: { txHash: string; outputIndex: number }): string {
  return `tx_hash: Output ${o.txHash}:${o.outputIndex} was recorded with another address, asset or amount; an output never changes.`;
}

/** Keeps refused outputs for operators (ops rejected-outputs), each with why. */
export async function keepRefused(tx: EntityManager, chain: { network: string; environment: Environment }, refused: readonly RefusedOutput[]): Promise<void> {
  for (const { o, blockHash, reason } of refused) {
    await recordRejection(tx, {
      network: chain.network,
      environment: chain.environment,
      txHash: o.txHash,
      outputIndex: o.outputIndex,
      asset: o.asset,
      toAddress: o.toAddress,
      amount: o.amount,
      blockHash,
      reason,
    });
  }
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
  const linkage = link(r.blocks, { tip, best, sideBelow, maxDepth, acceptDeeper: resumed, forkPointUnknown: r.forkPointUnknown === true });
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
    (c, o): BlockOutput => ({ ...c, outputIndex: o.outputIndex, blockHeight: o.block.height, blockHash: o.block.hash, observedAt: o.block.time ?? now, intentId: null }),
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
    ...(await intentsInBlocks(tx, chain, [...leave, ...joining])),
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
  const orphaned = await setOrphaned(tx, chain, leave, true, at);
  const byHash = new Map(r.blocks.map((b) => [b.hash, b]));
  await rejoinBest(tx, chain, linkage.rejoin);
  await joinBest(tx, chain, linkage.append.map((b) => blockRow(byHash.get(b.hash) ?? { ...b, time: undefined })), at);
  // A block that comes back brings its outputs back, reported again or not (an intent no longer watched).
  await setOrphaned(tx, chain, joining, false, at);
  const changed = await upsertBlockOutputs(tx, chain, [...outputs.values()], at);
  for (const o of changed) rejected.push({ o, blockHash: o.blockHash, reason: changedOutput(o) });
  await deriveConfirmations(tx, chain, newTip.height, below, joining, at);

  await settleMany(tx, deps.intents, intentOutputs, locked, at);
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

/** The refusal of every report while a chain is stopped. */
export function halted(chain: { network: string; environment: Environment }, reason: string) {
  return apiError("invalid_state", `Counting on ${chain.network} (${chain.environment}) is stopped: ${reason}.`, "blocks");
}
