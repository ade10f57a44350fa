import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import { ChainService, type ReportBlocksRequest, type ReportMempoolRequest } from "../../gen/payments/v1/chains_pb.ts";
import type { Environment } from "../auth/keys.ts";
import { speaksFor, type InternalPrincipal } from "../auth/principal.ts";
import type { Intents } from "../intents/intents.ts";
import { oldestWatchedCreatedAt, watchedAddresses, type WatchWindow } from "../intents/store.ts";
import type { CursorCodec } from "../platform/cursor.ts";
import { apiError, validationError } from "../platform/errors.ts";
import { chainRequest, inTransaction } from "../rpc/context.ts";
import { followedNetworks, reorgWindow } from "../vocabulary/assets.ts";
import { bestBefore, keptDepth, recentBest } from "./blocks.ts";
import { applyMempool, type MempoolReport } from "./mempool.ts";
import type { MempoolAbsenceRule } from "./mempool-rule.ts";
import { halted } from "./admission.ts";
import { rawTransactionOf } from "./validate.ts";
import { applyReport, type BlockReport, type ReportDeps } from "./report.ts";
import { requiredOnChain, type FixedCounts } from "./required.ts";
import { claimChain, reportNode, type Chain } from "./store.ts";
import { decodeWatchedCursor, encodeWatchedCursor, positionAfter } from "./watched-cursor.ts";


export interface ChainDeps {
  intents: Intents;
  cursors: CursorCodec;
  /** How long an intent's address is still watched once it can no longer be paid on time (LATE_PAYMENT_WINDOW_SECONDS, EXCEPTION_WATCH_SECONDS). */
  watch: WatchWindow;
  /** How many best blocks a fork may take away on a network before its chain stops (<NETWORK>_MAX_REORG_DEPTH). */
  maxReorgDepth(network: string): number;
  /** When a payment missing from the mempool's reports is withdrawn (MEMPOOL_ABSENT_READS, MEMPOOL_ABSENT_SECONDS). */
  mempoolAbsence: MempoolAbsenceRule;
  /** What a block report settles beyond intents (report.ts ReportDeps.settleOthers): the refunds. */
  settleOthers?: ReportDeps["settleOthers"];
}

/** Hex digits of a chain's total work (bitcoin's chainwork: 256 bits). */
const chainworkPattern = /^[0-9a-fA-F]{1,64}$/;
/** 32 bytes in hex: 0x-prefixed on EVM chains, bare on bitcoin. */
const blockHashPattern = /^(0x)?[0-9a-fA-F]{64}$/;
/** A bitcoin txid: 32 bytes in hex. */
const txHashPattern = /^[0-9a-fA-F]{64}$/;

/**
 * The chain a call is about: a network a built-in watcher can follow, in the credential's
 * environment, that the credential speaks for (internal-credential create --networks); any other
 * is refused with insufficient_scope before anything is read, lease or no lease.
 */
function chainOf(principal: InternalPrincipal, environment: Environment, network: string): Chain & { environment: Environment } {
  if (!(followedNetworks as readonly string[]).includes(network)) throw validationError("network", `No watcher follows "${network}"; followed: ${followedNetworks.join(", ")}.`);
  if (!speaksFor(principal, network)) {
    throw apiError(
      "insufficient_scope",
      `This internal credential does not speak for ${network}: issue the watcher a credential with --networks ${network} (admin internal-credential create).`,
      "network",
    );
  }
  return { network, environment };
}

function checkWatcherId(id: string): void {
  if (id.length < 1 || id.length > 100 || !/^[\x21-\x7e]+$/.test(id)) throw validationError("watcher_id", `"watcher_id" must be 1 to 100 printable ASCII characters without spaces.`);
}

/** A report as the core applies it: hashes checked and lowercased, heights in range. */
function reportOf(req: ReportBlocksRequest, credentialId: string): BlockReport {
  if (req.genesisHash !== "" && !blockHashPattern.test(req.genesisHash)) throw validationError("genesis_hash", "Not a block hash (64 hex digits, 0x optional).");
  const blocks = req.blocks.map((b, i) => {
    if (!blockHashPattern.test(b.hash)) throw validationError(`blocks[${i}].hash`, "Not a block hash (64 hex digits, 0x optional).");
    if (!blockHashPattern.test(b.parentHash)) throw validationError(`blocks[${i}].parent_hash`, "Not a block hash (64 hex digits, 0x optional).");
    if (b.height > BigInt(Number.MAX_SAFE_INTEGER)) throw validationError(`blocks[${i}].height`, `"height" is too large.`);
    if (b.chainwork !== "" && !chainworkPattern.test(b.chainwork)) throw validationError(`blocks[${i}].chainwork`, "Not a chain's work (up to 64 hex digits).");
    return {
      height: Number(b.height),
      hash: b.hash.toLowerCase(),
      parentHash: b.parentHash.toLowerCase(),
      time: b.time && timestampDate(b.time),
      work: b.chainwork === "" ? undefined : BigInt(`0x${b.chainwork}`),
      outputs: b.outputs.map((o) => ({ asset: o.asset, toAddress: o.toAddress, txHash: o.txHash, outputIndex: o.outputIndex, amount: o.amount, rawTransaction: rawTransactionOf(req.network, o) })),
    };
  });
  return {
    watcherId: req.watcherId,
    credentialId,
    epoch: Number(req.leaseEpoch),
    genesisHash: req.genesisHash === "" ? undefined : req.genesisHash.toLowerCase(),
    blocks,
    head: { height: Number(req.headHeight), time: req.headTime && timestampDate(req.headTime) },
    forkPointUnknown: req.forkPointUnknown,
  };
}

/** A mempool report as the core applies it: the tip hash checked and lowercased. */
function mempoolReportOf(req: ReportMempoolRequest, credentialId: string): MempoolReport {
  if (!blockHashPattern.test(req.tipHash)) throw validationError("tip_hash", "Not a block hash (64 hex digits, 0x optional).");
  return {
    watcherId: req.watcherId,
    credentialId,
    epoch: Number(req.leaseEpoch),
    tipHash: req.tipHash.toLowerCase(),
    outputs: req.outputs.map((m, i) => {
      const o = m.output;
      if (!o) throw validationError(`outputs[${i}].output`, `"output" is missing.`);
      return { asset: o.asset, toAddress: o.toAddress, txHash: o.txHash, outputIndex: o.outputIndex, amount: o.amount, replaceable: m.replaceable };
    }),
    conflicted: req.conflicted.map((h, i) => {
      if (!txHashPattern.test(h)) throw validationError(`conflicted[${i}]`, "Not a transaction hash (64 hex digits).");
      return h.toLowerCase();
    }),
  };
}

/** ChainService's handlers: what a chain watcher needs besides ObservationService (internal callers of the observe role). */
export function chainService(deps: ChainDeps): ServiceImpl<typeof ChainService> {
  const { intents, cursors } = deps;
  const fixedCounts: FixedCounts = new Map();
  return {
    async claimChain(req, ctx) {
      const { em, environment, principal } = chainRequest(ctx);
      const chain = chainOf(principal, environment, req.network);
      checkWatcherId(req.watcherId);
      if (req.leaseSeconds < 5 || req.leaseSeconds > 300) throw validationError("lease_seconds", `"lease_seconds" must be 5 to 300.`);
      const { active, row } = await claimChain(em, chain, req.watcherId, principal.credentialId, req.leaseSeconds);
      const maxReorgDepth = deps.maxReorgDepth(chain.network);
      // A claim that does not win learns who holds the chain and until when, and nothing else:
      // no epoch, position or tip to report under or build on.
      if (!active) return { active, holder: row.holder, leaseExpiresAt: timestampFromDate(row.leaseExpiresAt), maxReorgDepth };
      // Read fresh for the claim (a watcher starting looks that far back), and kept for the reports
      // that follow it: the first after a reconnect does not scan the open intents again.
      const requiredConfirmations = await requiredOnChain(em, intents, chain, deps.watch, fixedCounts, { fresh: true });
      const oldest = await oldestWatchedCreatedAt(em, chain, deps.watch);
      // The position is the core's best tip and the blocks below it: enough to find where a fork
      // twice as deep as the deepest followed left the chain; the watcher looks for a deeper one's
      // fork point in the rest of the kept chain a page at a time (listBestBlocks).
      const recent = await recentBest(em, chain, Math.min(keptDepth, reorgWindow(maxReorgDepth)));
      const top = recent.at(-1);
      const height = top?.height ?? row.height;
      return {
        active,
        holder: row.holder,
        leaseExpiresAt: timestampFromDate(row.leaseExpiresAt),
        position:
          height === null
            ? undefined
            : { height: BigInt(height), recentBlocks: recent.map((b) => ({ height: BigInt(b.height), hash: b.hash })), genesisHash: row.genesisHash ?? "" },
        requiredConfirmations,
        epoch: BigInt(row.epoch),
        oldestWatchedCreatedAt: oldest && timestampFromDate(oldest),
        maxReorgDepth,
        halted: row.haltedReason ?? "",
        haltedDepth: row.haltedDepth ?? 0,
        haltedDepthIsLowerBound: row.haltedDepth !== null && row.haltedDepthIsLowerBound,
      };
    },

    async reportBlocks(req, ctx) {
      const { em, environment, principal } = chainRequest(ctx);
      const chain = chainOf(principal, environment, req.network);
      checkWatcherId(req.watcherId);
      const report = reportOf(req, principal.credentialId);
      const outcome = await inTransaction(em, (tx) => applyReport(tx, { ...deps, fixedCounts }, chain, report));
      if (outcome.halted) throw halted(chain, outcome.halted);
      return {
        tip: outcome.tip && { height: BigInt(outcome.tip.height), hash: outcome.tip.hash },
        appended: outcome.appended,
        orphaned: outcome.orphaned,
        rejected: outcome.rejected,
        settled: outcome.settled,
      };
    },

    async listBestBlocks(req, ctx) {
      const { em, environment, principal } = chainRequest(ctx);
      const chain = chainOf(principal, environment, req.network);
      const blocks = await bestBefore(em, chain, Number(req.beforeHeight), req.limit ?? 256);
      return { blocks: blocks.map((b) => ({ height: BigInt(b.height), hash: b.hash })) };
    },

    async reportMempool(req, ctx) {
      const { em, environment, principal } = chainRequest(ctx);
      const chain = chainOf(principal, environment, req.network);
      checkWatcherId(req.watcherId);
      const report = mempoolReportOf(req, principal.credentialId);
      return inTransaction(em, (tx) => applyMempool(tx, deps, chain, report));
    },

    async reportChainNode(req, ctx) {
      const { em, environment, principal } = chainRequest(ctx);
      const chain = chainOf(principal, environment, req.network);
      checkWatcherId(req.watcherId);
      await reportNode(em, chain, req.watcherId, req.node, req.problem === "" ? null : req.problem);
      return {};
    },

    async getChainCredential(_req, ctx) {
      return { environment: chainRequest(ctx).environment };
    },

    async listWatchedAddresses(req, ctx) {
      const { em, environment, principal } = chainRequest(ctx);
      const chain = chainOf(principal, environment, req.network);
      const limit = req.limit ?? 5000;
      // In the order of the creating transactions, not of a clock: once caught up, the next call
      // starts at the oldest transaction still open when the read began (watched-cursor.ts), so an
      // intent whose create commits late, however late, is handed out then (the caller keeps a set).
      const from = decodeWatchedCursor(cursors, chain, req.cursor);
      const { rows, horizon } = await watchedAddresses(em, chain, deps.watch, from.after, limit + 1);
      const page = rows.slice(0, limit);
      const hasMore = rows.length > limit;
      const last = page.at(-1);
      const next = positionAfter(from, horizon, last && { xid: last.xid, id: last.id }, hasMore);
      return { addresses: page.map((r) => r.address), hasMore, nextCursor: encodeWatchedCursor(cursors, chain, next) };
    },
  };
}
