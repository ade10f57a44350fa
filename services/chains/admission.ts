import type { Environment } from "../auth/keys.ts";
import { apiError, describeError } from "../platform/errors.ts";
import type { EntityManager } from "../platform/db.ts";
import { mainnetBlock0 } from "../vocabulary/assets.ts";
import { forgetChain } from "./blocks.ts";
import { admit } from "./linkage.ts";
import { outputChanged } from "./output-store.ts";
import { recordRejection } from "./rejected-outputs.ts";
import { checkOutput } from "./validate.ts";

/**
 * What a watcher's report must be before it changes anything, for blocks (report.ts) and the
 * mempool (mempool.ts) alike: sent by the lease's holder of the current epoch, on a chain not
 * stopped; and of each output, whether the core can take it, with why not kept for operators.
 */

/** Who sends a report: the watcher id and the credential it came with (the lease's holder, or refused). */
export interface Reporter {
  watcherId: string;
  credentialId: string;
}

/** An output as a watcher reports it, before it is checked. */
export interface ReportedOutput {
  asset: string;
  toAddress: string;
  txHash: string;
  outputIndex: number;
  amount: string;
  /** Bitcoin: its transaction's bytes without witnesses, hex, once checked to hash to txHash (rawTransactionOf). */
  rawTransaction?: string | undefined;
}

/** A report the core refuses, changing nothing: why, and what the watcher should do about it. */
export function refusal(kind: "stale_epoch" | "not_holder" | "unlinked" | "other_chain", message: string) {
  return apiError("invalid_state", message, kind === "stale_epoch" || kind === "not_holder" ? "lease_epoch" : kind === "other_chain" ? "genesis_hash" : "blocks");
}

/** The refusal of every report while a chain is stopped. */
export function halted(chain: { network: string; environment: Environment }, reason: string) {
  return apiError("invalid_state", `Counting on ${chain.network} (${chain.environment}) is stopped: ${reason}.`, "blocks");
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
  const mainnet = mainnetBlock0(chain.network);
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
      mainnet === undefined
        ? `No block 0 of ${chain.network} mainnet is pinned in this release: Live ${chain.network} is not followed yet.`
        : r.genesisHash === undefined
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

/** A validation error as the reason an output is refused (the field it names: its message); any other error is no refusal. */
function reasonOf(err: unknown): string | undefined {
  const view = describeError(err);
  return view.code === "validation_failed" ? `${view.param ?? "output"}: ${view.message}` : undefined;
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
      const reason = reasonOf(err);
      if (reason === undefined) throw err;
      refused.push({ o, reason });
    }
  }
  return { valid, refused };
}

/** Why an output already recorded with another address, asset or amount is refused (output-store.ts refuses it). */
export function changedOutput(o: { txHash: string; outputIndex: number }): string {
  return reasonOf(outputChanged(o)) as string;
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
