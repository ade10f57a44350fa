import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import { ChainService, type ChainPosition } from "../../gen/payments/v1/chains_pb.ts";
import type { Environment } from "../auth/keys.ts";
import type { Intents } from "../intents/intents.ts";
import { highestFixedConfirmations, watchedAddresses } from "../intents/store.ts";
import type { CursorCodec } from "../platform/cursor.ts";
import { apiError, validationError } from "../platform/errors.ts";
import { chainRequest } from "../rpc/context.ts";
import { assets, followedNetworks } from "../vocabulary/assets.ts";
import { highestConfirmations } from "../policy/policy.ts";
import { claimChain, savePosition, type BlockRef, type Chain } from "./store.ts";


export interface ChainDeps {
  intents: Intents;
  cursors: CursorCodec;
  /** How long after expiry an intent's address is still watched (LATE_PAYMENT_WINDOW_SECONDS). */
  latePaymentWindowSeconds: number;
}

/** A transaction that commits this long after its intent's created_at is still handed to the watchers. */
const commitLagMs = 10_000;
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

function positionOf(p: ChainPosition | undefined): { height: number; recentBlocks: BlockRef[] } {
  if (!p) throw validationError("position", `"position" is required.`);
  if (p.recentBlocks.length > maxRecentBlocks) throw validationError("position.recent_blocks", `At most ${maxRecentBlocks} recent blocks.`);
  const recentBlocks = p.recentBlocks.map((b, i) => {
    if (!blockHashPattern.test(b.hash)) throw validationError(`position.recent_blocks[${i}].hash`, "Not a block hash (64 hex digits, 0x optional).");
    return { height: Number(b.height), hash: b.hash.toLowerCase() };
  });
  return { height: Number(p.height), recentBlocks };
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
      return {
        active,
        holder: row.holder,
        leaseExpiresAt: timestampFromDate(row.leaseExpiresAt),
        position:
          row.height === null ? undefined : { height: BigInt(row.height), recentBlocks: (row.recentBlocks ?? []).map((b) => ({ height: BigInt(b.height), hash: b.hash })) },
        requiredConfirmations,
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

    async listWatchedAddresses(req, ctx) {
      const { em, environment } = chainRequest(ctx);
      const chain = chainOf(environment, req.network);
      const limit = req.limit ?? 5000;
      const binding = `watched:${chain.network}:${chain.environment}`;
      const after = cursors.start(binding, req.cursor);
      const rows = await watchedAddresses(em, chain, deps.latePaymentWindowSeconds, after, limit + 1);
      const page = rows.slice(0, limit);
      const hasMore = rows.length > limit;
      let next = page.at(-1) ?? after ?? { createdAt: new Date(0), id: "" };
      // Once caught up, the next call starts a little back: an intent whose transaction commits
      // after a later one was listed is still handed out (the caller keeps a set).
      const settled = new Date(Date.now() - commitLagMs);
      if (!hasMore && next.createdAt > settled) next = { createdAt: settled, id: "" };
      return { addresses: page.map((r) => r.address), hasMore, nextCursor: cursors.encode(binding, { t: next.createdAt.getTime(), i: next.id }) };
    },
  };
}
