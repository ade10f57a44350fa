import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import { ChainService } from "../../gen/payments/v1/chains_pb.ts";
import type { MempoolOutput } from "./bitcoin-source.ts";
import type { BlockRef, ReportedBlock } from "./follow.ts";

/** What ClaimChain answered, in the watcher's terms. */
export interface Claim {
  active: boolean;
  holder: string;
  position: { height: number; recentBlocks: BlockRef[]; genesisHash: string | undefined } | undefined;
  required: Record<string, number>;
  oldestWatched: Date | undefined;
  /** How many best blocks a fork may take away and still be followed: the follower keeps twice that, and some. */
  maxReorgDepth: number;
  /**
   * Why the core counts nothing on the chain now (a fork deeper than the maximum), and how deep
   * (`depthIsLowerBound`: at least that deep, the branches part below every block known); undefined while it counts.
   */
  halted: { reason: string; depth: number; depthIsLowerBound: boolean } | undefined;
}

/**
 * The watcher's side of ChainService for one chain: the only place that speaks gRPC to the core.
 * Each call carries the watcher's internal credential.
 */
export class CoreClient {
  readonly #chains;
  readonly #headers: Record<string, string>;
  readonly #network: string;
  readonly #watcherId: string;

  constructor(network: string, watcherId: string, core: { transport: Transport; credential: string }) {
    this.#network = network;
    this.#watcherId = watcherId;
    this.#chains = createClient(ChainService, core.transport);
    this.#headers = { authorization: `Bearer ${core.credential}` };
  }

  async claim(leaseSeconds: number): Promise<Claim & { epoch: bigint }> {
    const res = await this.#chains.claimChain({ network: this.#network, watcherId: this.#watcherId, leaseSeconds }, { headers: this.#headers });
    return {
      active: res.active,
      holder: res.holder,
      epoch: res.epoch,
      position: res.position && {
        height: Number(res.position.height),
        recentBlocks: res.position.recentBlocks.map((b) => ({ height: Number(b.height), hash: b.hash })),
        genesisHash: res.position.genesisHash === "" ? undefined : res.position.genesisHash,
      },
      required: res.requiredConfirmations,
      oldestWatched: res.oldestWatchedCreatedAt && timestampDate(res.oldestWatchedCreatedAt),
      maxReorgDepth: res.maxReorgDepth,
      halted: res.halted === "" ? undefined : { reason: res.halted, depth: res.haltedDepth, depthIsLowerBound: res.haltedDepthIsLowerBound },
    };
  }

  /** Reports blocks (none: a heartbeat) under the lease's epoch; the core answers with its tip and what it did. */
  report(blocks: readonly ReportedBlock[], head: { height: number; time: number | undefined }, epoch: bigint, genesisHash: string | undefined, forkPointUnknown = false) {
    return this.#chains.reportBlocks(
      {
        network: this.#network,
        watcherId: this.#watcherId,
        leaseEpoch: epoch,
        genesisHash: genesisHash ?? "",
        blocks: blocks.map((b) => ({
          height: BigInt(b.height),
          hash: b.hash,
          parentHash: b.parentHash,
          time: timestampFromDate(new Date(b.time * 1000)),
          chainwork: b.chainwork ?? "",
          outputs: b.outputs.map((o) => ({ asset: o.asset, toAddress: o.toAddress, txHash: o.txHash, outputIndex: o.outputIndex, amount: o.amount, rawTransaction: o.rawTransaction })),
        })),
        headHeight: BigInt(head.height),
        headTime: head.time === undefined ? undefined : timestampFromDate(new Date(head.time * 1000)),
        forkPointUnknown,
      },
      { headers: this.#headers },
    );
  }

  /** The core's best chain's newest `count` blocks below `beforeHeight`, oldest first (none: it keeps none that low). */
  async bestBefore(beforeHeight: number, count: number): Promise<BlockRef[]> {
    const res = await this.#chains.listBestBlocks({ network: this.#network, beforeHeight: BigInt(Math.max(0, beforeHeight)), limit: count }, { headers: this.#headers });
    return res.blocks.map((b) => ({ height: Number(b.height), hash: b.hash }));
  }

  /** Reports the mempool's watched outputs as read against `tipHash`, and the payments conflicted, under the lease's epoch. */
  reportMempool(tipHash: string, outputs: readonly MempoolOutput[], conflicted: readonly string[], epoch: bigint) {
    return this.#chains.reportMempool(
      {
        network: this.#network,
        watcherId: this.#watcherId,
        leaseEpoch: epoch,
        tipHash,
        outputs: outputs.map((o) => ({
          output: { asset: o.asset, toAddress: o.toAddress, txHash: o.txHash, outputIndex: o.outputIndex, amount: o.amount },
          replaceable: o.replaceable,
        })),
        conflicted: [...conflicted],
      },
      { headers: this.#headers },
    );
  }

  listWatched(cursor: string | undefined) {
    return this.#chains.listWatchedAddresses({ network: this.#network, cursor, limit: 10_000 }, { headers: this.#headers });
  }

  /** What the watcher found about its node (problem empty: it follows it). */
  async reportNode(node: string, problem: string): Promise<void> {
    await this.#chains.reportChainNode({ network: this.#network, watcherId: this.#watcherId, node, problem: problem.slice(0, 500) }, { headers: this.#headers });
  }
}

/**
 * The environment the core says `credential` speaks for (ChainService.GetChainCredential), asked
 * again while the core cannot be reached, for up to `withinMs`; any other refusal is thrown.
 */
export async function credentialEnvironment(transport: Transport, credential: string, withinMs = 10_000): Promise<string> {
  const chains = createClient(ChainService, transport);
  const until = Date.now() + withinMs;
  for (;;) {
    try {
      const res = await chains.getChainCredential({}, { headers: { authorization: `Bearer ${credential}` }, timeoutMs: Math.max(1, Math.min(5_000, until - Date.now())) });
      return res.environment;
    } catch (err) {
      const unreachable = err instanceof ConnectError && (err.code === Code.Unavailable || err.code === Code.DeadlineExceeded);
      if (!unreachable || Date.now() + 500 >= until) throw err;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }
}
