import { create } from "@bufbuild/protobuf";
import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import { ConnectError, type ServiceImpl } from "@connectrpc/connect";
import { ObservationSchema, ObservationService, type Observation, type RecordObservationRequest } from "../../gen/payments/v1/observations_pb.ts";
import type { Intents } from "../intents/intents.ts";
import { pageSizeOf } from "../intents/validate.ts";
import type { CursorCodec } from "../platform/cursor.ts";
import { apiError, describeError, validationError } from "../platform/errors.ts";
import type { EntityManager } from "../platform/db.ts";
import { chainFollowed } from "../chains/store.ts";
import type { Environment } from "../auth/keys.ts";
import { chainRequest, inTransaction } from "../rpc/context.ts";
import { recordObservation, recordReorg } from "./record.ts";
import { listUnmatched } from "../chains/outputs.ts";
import type { ObservationInput, ObservationRow } from "../chains/output-store.ts";
import { recordRejection } from "../chains/rejected-outputs.ts";
import { checkNetwork, checkOutput, hashPattern, normalizeHash } from "../chains/validate.ts";
import { speaksFor, type InternalPrincipal } from "../auth/principal.ts";

export interface ObservationDeps {
  intents: Intents;
  cursors: CursorCodec;
}

export function validateObservation(req: RecordObservationRequest, environment: Environment): ObservationInput {
  checkNetwork(req.network);
  const { asset, toAddress, txHash, amount } = checkOutput(req.network, req);
  if (req.blockHash !== "" && !hashPattern.test(req.blockHash)) throw validationError("block_hash", `"block_hash" must be the block's hash.`);
  if (req.confirmations > 0 && req.blockHash === "") throw validationError("block_hash", `"block_hash" is required once the output has confirmations.`);
  if (req.blockHeight > BigInt(Number.MAX_SAFE_INTEGER)) throw validationError("block_height", `"block_height" is too large.`);
  return {
    network: req.network,
    environment,
    asset,
    toAddress,
    txHash,
    outputIndex: req.outputIndex,
    amount,
    confirmations: req.confirmations,
    blockHeight: req.blockHash === "" ? null : Number(req.blockHeight),
    blockHash: req.blockHash === "" ? null : normalizeHash(req.network, req.blockHash),
    observedAt: req.observedAt ? timestampDate(req.observedAt) : new Date(),
  };
}

export function observationMessage(o: ObservationRow): Observation {
  return create(ObservationSchema, {
    network: o.network,
    asset: o.asset,
    toAddress: o.toAddress,
    txHash: o.txHash,
    outputIndex: o.outputIndex,
    amount: o.amount,
    confirmations: o.confirmations,
    blockHeight: o.blockHeight === null ? undefined : BigInt(o.blockHeight),
    blockHash: o.blockHash ?? undefined,
    observedAt: timestampFromDate(o.observedAt),
    paymentIntentId: o.paymentIntentId ?? undefined,
    counted: o.counted,
    orphaned: o.orphaned,
  });
}

/** Why the core refused an output (validation_failed: its message), or undefined for any other failure (a database outage is no refusal). */
function refusalOf(err: unknown): string | undefined {
  if (!(err instanceof ConnectError)) return undefined;
  const view = describeError(err);
  return view.code === "validation_failed" ? `${view.param ?? "output"}: ${view.message}` : undefined;
}

/**
 * Refuses, with insufficient_scope and before anything is read or kept, a call on a network the
 * credential does not speak for (internal-credential create --networks; without it, only the
 * networks no built-in watcher follows).
 */
function mustSpeakFor(principal: InternalPrincipal, network: string): void {
  checkNetwork(network);
  if (speaksFor(principal, network)) return;
  throw apiError(
    "insufficient_scope",
    `This internal credential does not speak for ${network}: ${network} is followed by the built-in chain watcher unless a credential is issued for it with --networks ${network}.`,
    "network",
  );
}

/**
 * Refuses, changing nothing, a report on a chain a built-in watcher has ever claimed (its
 * chain_watchers row), whatever its lease now: that chain's outputs, confirmations and forks come
 * from the blocks it reports, and one source of chain truth is all there is. A lapsed lease (the
 * node down, a deploy) does not reopen it.
 */
async function notFollowed(tx: EntityManager, chain: { network: string; environment: Environment }): Promise<void> {
  if (!(await chainFollowed(tx, chain))) return;
  throw apiError(
    "invalid_state",
    `${chain.network} (${chain.environment}) is followed by the built-in chain watcher: its outputs and reorgs come from the blocks it reports (ChainService.ReportBlocks), not from ObservationService.`,
    "network",
  );
}

/** ObservationService's handlers (internal callers only: the interceptor checked the credential). */
export function observationService(deps: ObservationDeps): ServiceImpl<typeof ObservationService> {
  const { intents, cursors } = deps;
  return {
    async recordObservation(req, ctx) {
      const { em, environment, principal } = chainRequest(ctx);
      mustSpeakFor(principal, req.network);
      let recorded: Awaited<ReturnType<typeof recordObservation>>;
      try {
        const input = validateObservation(req, environment);
        recorded = await inTransaction(em, async (tx) => {
          await notFollowed(tx, { network: input.network, environment });
          return recordObservation(tx, intents, input, false);
        });
      } catch (err) {
        // An output the core cannot take is kept for operators, with why; the caller is told as before.
        const reason = refusalOf(err);
        if (reason !== undefined && !em.isInTransaction()) {
          await recordRejection(em, { ...req, environment, blockHash: req.blockHash === "" ? null : req.blockHash, reason });
        }
        throw err;
      }
      return {
        data: observationMessage(recorded.observation),
        paymentIntentStatus: recorded.intent?.status,
        requiredConfirmations: recorded.intent ? intents.confirmationsOf(recorded.intent) : 0,
      };
    },

    async recordReorg(req, ctx) {
      const { em, environment, principal } = chainRequest(ctx);
      mustSpeakFor(principal, req.network);
      const hashes = [...req.orphanedBlockHashes, ...req.txHashes];
      if (hashes.length === 0) throw validationError("orphaned_block_hashes", "Give orphaned_block_hashes or tx_hashes.");
      const bad = req.orphanedBlockHashes.findIndex((h) => !hashPattern.test(h));
      if (bad >= 0) throw validationError("orphaned_block_hashes", `orphaned_block_hashes[${bad}] is not a block hash.`);
      const badTx = req.txHashes.findIndex((h) => !hashPattern.test(h));
      if (badTx >= 0) throw validationError("tx_hashes", `tx_hashes[${badTx}] is not a transaction hash.`);
      const result = await inTransaction(em, async (tx) => {
        await notFollowed(tx, { network: req.network, environment });
        const norm = (h: string) => normalizeHash(req.network, h);
        return recordReorg(tx, intents, req.network, environment, req.orphanedBlockHashes.map(norm), req.txHashes.map(norm));
      });
      return { orphaned: result.orphaned, paymentIntentIds: result.intents.map((i) => i.id) };
    },

    async listUnmatchedObservations(req, ctx) {
      const { em, environment } = chainRequest(ctx);
      if (req.network !== undefined) checkNetwork(req.network);
      const limit = pageSizeOf(req.limit);
      const page = await listUnmatched(em, cursors, { environment, network: req.network, cursor: req.cursor, limit });
      return { data: page.rows.map(observationMessage), hasMore: page.hasMore, nextCursor: page.nextCursor };
    },
  };
}
