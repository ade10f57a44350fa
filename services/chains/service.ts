import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import { ChainService, type ChainPosition } from "../../gen/payments/v1/chains_pb.ts";
import type { Environment } from "../auth/keys.ts";
import type { Intents } from "../intents/intents.ts";
import { highestFixedConfirmations, oldestWatchedCreatedAt, watchedAddresses } from "../intents/store.ts";
import type { CursorCodec } from "../platform/cursor.ts";
import { apiError, validationError } from "../platform/errors.ts";
import { chainRequest } from "../rpc/context.ts";
import { assets, followedNetworks } from "../vocabulary/assets.ts";
import { highestConfirmations } from "../policy/policy.ts";
import { claimChain, reportNode, savePosition, type BlockRef, type Chain } from "./store.ts";
import { decodeWatchedCursor, encodeWatchedCursor, positionAfter } from "./watched-cursor.ts";


export interface ChainDeps {
  intents: Intents;
  cursors: CursorCodec;
  /** How long after expiry an intent's address is still watched (LATE_PAYMENT_WINDOW_SECONDS). */
  latePaymentWindowSeconds: number;
}

const maxRecentBlocks = 1024;
/** 32 bytes in hex: 0x-prefixed on EVM chains, bare on bitcoin. */
const blockHashPattern = /^(0x)?[0-9a-fA-F]{64}$/;

function chainOf(environment: Environment, network: string): Chain & { environment: Environment } {
  if (!(followedNetworks as readonly string[]).includes(network)) throw validationError("network", `No watcher follows "${network}"; followed: ${followedNetworks.join(", ")}.`);
  return { network, environment };
}

function checkWatcherId(id: string): void {
  if (id.length < 1 || id.length > 100 || !/^[\x21-\x7e]+$/.test(id)) throw validationError("watcher_id", `"watcher_id" must be 1 to 100 printable ASCII characters without spaces.`);
}

function positionOf(p: ChainPosition | undefined): { height: number; recentBlocks: BlockRef[]; genesisHash: string | undefined } {
  if (!p) throw validationError("position", `"position" is required.`);
  if (p.recentBlocks.length > maxRecentBlocks) throw validationError("position.recent_blocks", `At most ${maxRecentBlocks} recent blocks.`);
  const recentBlocks = p.recentBlocks.map((b, i) => {
    if (!blockHashPattern.test(b.hash)) throw validationError(`position.recent_blocks[${i}].hash`, "Not a block hash (64 hex digits, 0x optional).");
    return { height: Number(b.height), hash: b.hash.toLowerCase() };
  });
  if (p.genesisHash !== "" && !blockHashPattern.test(p.genesisHash)) throw validationError("position.genesis_hash", "Not a block hash (64 hex digits, 0x optional).");
  return { height: Number(p.height), recentBlocks, genesisHash: p.genesisHash === "" ? undefined : p.genesisHash.toLowerCase() };
}

/** ChainService's handlers: what a chain watcher needs besides ObservationService (internal callers of the observe role). */
export function chainService(deps: ChainDeps): ServiceImpl<typeof ChainService> {
  const { intents, cursors } = deps;
  return {
    async claimChain(req, ctx) {
      const { em, environment } = chainRequest(ctx);
      const chain = chainOf(environment, req.network);
      checkWatcherId(req.watcherId);
      if (req.leaseSeconds < 5 || req.leaseSeconds > 300) throw validationError("lease_seconds", `"lease_seconds" must be 5 to 300.`);
      const { active, row } = await claimChain(em, chain, req.watcherId, req.leaseSeconds);
      // The most any output on the chain can need: merchants' rules now, and the counts open intents
      // were created with (a rule lowered or removed since does not lower theirs).
      const highest = Math.max(
        await highestConfirmations(em, chain.environment, chain.network),
        await highestFixedConfirmations(em, chain, deps.latePaymentWindowSeconds),
      );
      const requiredConfirmations: Record<string, number> = {};
      for (const a of assets.filter((a) => a.network === chain.network)) requiredConfirmations[a.asset] = Math.max(intents.requiredConfirmations(a), highest);
      const oldest = await oldestWatchedCreatedAt(em, chain, deps.latePaymentWindowSeconds);
      return {
        active,
        holder: row.holder,
        leaseExpiresAt: timestampFromDate(row.leaseExpiresAt),
        position:
          row.height === null
            ? undefined
            : { height: BigInt(row.height), recentBlocks: (row.recentBlocks ?? []).map((b) => ({ height: BigInt(b.height), hash: b.hash })), genesisHash: row.genesisHash ?? "" },
        requiredConfirmations,
        epoch: BigInt(row.epoch),
        oldestWatchedCreatedAt: oldest && timestampFromDate(oldest),
      };
    },

    async saveChainPosition(req, ctx) {
      const { em, environment } = chainRequest(ctx);
      const chain = chainOf(environment, req.network);
      checkWatcherId(req.watcherId);
      const position = positionOf(req.position);
      const saved = await savePosition(em, chain, req.watcherId, position, {
        height: Number(req.headHeight),
        time: req.headTime && timestampDate(req.headTime),
      });
      if (!saved) {
        throw apiError("invalid_state", `Watcher ${req.watcherId} does not hold the lease on ${chain.network} (${chain.environment}): claim it first; another watcher may have taken over.`, "watcher_id");
      }
      return {};
    },

    async reportChainNode(req, ctx) {
      const { em, environment } = chainRequest(ctx);
      const chain = chainOf(environment, req.network);
      checkWatcherId(req.watcherId);
      await reportNode(em, chain, req.watcherId, req.node, req.problem === "" ? null : req.problem);
      return {};
    },

    async listWatchedAddresses(req, ctx) {
      const { em, environment } = chainRequest(ctx);
      const chain = chainOf(environment, req.network);
      const limit = req.limit ?? 5000;
      // In the order of the creating transactions, not of a clock: once caught up, the next call
      // starts at the oldest transaction still open when the read began (watched-cursor.ts), so an
      // intent whose create commits late, however late, is handed out then (the caller keeps a set).
      const from = decodeWatchedCursor(cursors, chain, req.cursor);
      const { rows, horizon } = await watchedAddresses(em, chain, deps.latePaymentWindowSeconds, from.after, limit + 1);
      const page = rows.slice(0, limit);
      const hasMore = rows.length > limit;
      const last = page.at(-1);
      const next = positionAfter(from, horizon, last && { xid: last.xid, id: last.id }, hasMore);
      return { addresses: page.map((r) => r.address), hasMore, nextCursor: encodeWatchedCursor(cursors, chain, next) };
    },
  };
}
