import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import type { Registry } from "prom-client";
import { ChainService } from "../../gen/payments/v1/chains_pb.ts";
import { ObservationService } from "../../gen/payments/v1/observations_pb.ts";
import type { ChainEndpoint } from "../platform/config.ts";
import type { Logger } from "../platform/logger.ts";
import { assets } from "../vocabulary/assets.ts";
import { evmNode, redactNodeUrl, type EvmNode } from "./evm-node.ts";
import { Follower, type BlockRef, type Core } from "./follow.ts";
import { watcherMetrics, type WatcherMetrics } from "./metrics.ts";

export interface WatcherRoleOptions {
  endpoints: readonly ChainEndpoint[];
  pollMs: number;
  leaseSeconds: number;
  /** How the watcher reaches the core in an environment: a transport and the internal credential it sends. */
  coreFor(environment: "test" | "live"): { transport: Transport; credential: string };
  logger: Logger;
  registry: Registry;
}

/** A full re-read of the watched addresses this often drops those of intents that can no longer be paid. */
const resyncMs = 10 * 60_000;
const maxBackoffMs = 30_000;
/** A watcher with nothing new to save still saves this often. */
const heartbeatMs = 15_000;

/** Follows each configured chain while this process holds its lease; stop() ends every loop. */
export function startWatcherRole(o: WatcherRoleOptions): { stop(): Promise<void> } {
  const watcherId = `${hostname()}-${process.pid}-${randomBytes(3).toString("hex")}`;
  const metrics = watcherMetrics(o.registry);
  const controller = new AbortController();
  const loops = o.endpoints.map((endpoint) => new ChainWatch(endpoint, watcherId, o, metrics, controller.signal).run());
  return {
    async stop() {
      controller.abort();
      await Promise.allSettled(loops);
    },
  };
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done);
  });
}

/** Which side failed: a call to the node, or to the core. */
class NodeFailure extends Error {}

class ChainWatch {
  readonly #e: ChainEndpoint;
  readonly #id: string;
  readonly #o: WatcherRoleOptions;
  readonly #m: WatcherMetrics;
  readonly #signal: AbortSignal;
  readonly #labels: { network: string; environment: string };
  readonly #node: EvmNode;
  readonly #chains;
  readonly #observations;
  readonly #headers: Record<string, string>;
  readonly #log: Logger;
  readonly #watched = new Set<string>();
  #cursor: string | undefined;
  #resyncAt = 0;
  #follower: Follower | undefined;
  #leaseRenewAt = 0;
  #failing: string | undefined;
  #standingBy: string | undefined;
  #savedAt = 0;

  constructor(e: ChainEndpoint, id: string, o: WatcherRoleOptions, m: WatcherMetrics, signal: AbortSignal) {
    this.#e = e;
    this.#id = id;
    this.#o = o;
    this.#m = m;
    this.#signal = signal;
    this.#labels = { network: e.network, environment: e.environment };
    this.#node = evmNode(e.url);
    const core = o.coreFor(e.environment);
    this.#chains = createClient(ChainService, core.transport);
    this.#observations = createClient(ObservationService, core.transport);
    this.#headers = { authorization: `Bearer ${core.credential}` };
    this.#log = o.logger.child({ chain: `${e.network}/${e.environment}`, node: redactNodeUrl(e.url) });
  }

  async run(): Promise<void> {
    let backoff = this.#o.pollMs;
    this.#log.info({ watcher: this.#id }, "chain watcher started");
    while (!this.#signal.aborted) {
      try {
        const started = Date.now();
        const busy = await this.#tick();
        if (this.#failing) {
          this.#log.info({ after: this.#failing }, "chain watcher resumed");
          this.#failing = undefined;
        }
        backoff = this.#o.pollMs;
        // Polls start every pollMs, whatever a round took (a slow round is followed at once).
        if (!busy) await sleep(Math.max(0, this.#o.pollMs - (Date.now() - started)), this.#signal);
      } catch (err) {
        if (this.#signal.aborted) break;
        const side = err instanceof NodeFailure ? "node" : "core";
        if (side === "node") this.#m.rpcErrors.inc(this.#labels);
        const reason = `${side}: ${(err as Error).message.split("\n")[0]}`;
        // Once per outage, not once per retry.
        if (this.#failing === undefined) this.#log.warn({ reason, retry_ms: backoff }, "chain watcher cannot go on; retrying with backoff");
        this.#failing = reason;
        if (err instanceof ConnectError && err.code === Code.FailedPrecondition) this.#drop();
        await sleep(backoff, this.#signal);
        backoff = Math.min(maxBackoffMs, backoff * 2);
      }
    }
    this.#m.active.set(this.#labels, 0);
    await this.#node.close().catch(() => undefined);
    this.#log.info("chain watcher stopped");
  }

  #drop(): void {
    this.#follower = undefined;
    this.#m.active.set(this.#labels, 0);
  }

  async #nodeCall<T>(call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (err) {
      throw new NodeFailure((err as Error).message);
    }
  }

  /** One round: hold the lease, learn the head and the new addresses, process what is new. True when more is waiting. */
  async #tick(): Promise<boolean> {
    if (!(await this.#holdLease())) return false;
    const head = await this.#nodeCall(() => this.#node.headHeight());
    this.#m.head.set(this.#labels, head);
    // Addresses after the head: a payment in a block up to it was made to an address handed out before.
    await this.#refreshWatched();
    if (!this.#follower) {
      const claim = await this.#claim();
      const position = claim.position ?? { height: Math.max(0, head - 1), recentBlocks: [] };
      const follower = new Follower(
        {
          node: this.#guardedNode(),
          core: this.#core(),
          assets: assets.filter((a) => a.network === this.#e.network).map((info) => ({ info, contract: info.contract?.[this.#e.environment] })),
          required: claim.required,
          watched: this.#watched,
          onBlock: (b, h) => {
            this.#m.processed.set(this.#labels, b.height);
            this.#m.lagBlocks.set(this.#labels, Math.max(0, h - b.height));
          },
          onOutput: () => this.#m.outputs.inc(this.#labels),
          onReorg: (blocks) => {
            this.#m.reorgs.inc(this.#labels, blocks.length);
            this.#log.warn({ blocks: blocks.map((b) => b.height) }, "blocks left the best chain; their outputs no longer count");
          },
        },
        position,
      );
      await follower.resume(head);
      this.#follower = follower;
      this.#m.active.set(this.#labels, 1);
      this.#log.info({ from: position.height + 1, head }, "following the chain");
    }
    const follower = this.#follower;
    const deadline = Date.now() + Math.max(1000, (this.#o.leaseSeconds * 1000) / 3);
    let busy = true;
    while (busy && Date.now() < deadline && !this.#signal.aborted) busy = await follower.step(head);
    this.#m.lagBlocks.set(this.#labels, Math.max(0, head - follower.position.height));
    // On a quiet chain the saved position doubles as a heartbeat: readiness tells "following" by it.
    if (Date.now() - this.#savedAt > heartbeatMs) await this.#core().save(follower.position, { height: head, time: undefined });
    return busy;
  }

  async #claim(): Promise<{ active: boolean; holder: string; position: { height: number; recentBlocks: BlockRef[] } | undefined; required: Record<string, number> }> {
    const res = await this.#chains.claimChain({ network: this.#e.network, watcherId: this.#id, leaseSeconds: this.#o.leaseSeconds }, { headers: this.#headers });
    this.#leaseRenewAt = Date.now() + (this.#o.leaseSeconds * 1000) / 3;
    return {
      active: res.active,
      holder: res.holder,
      position: res.position && { height: Number(res.position.height), recentBlocks: res.position.recentBlocks.map((b) => ({ height: Number(b.height), hash: b.hash })) },
      required: res.requiredConfirmations,
    };
  }

  /** Renews the lease when due; false (and standing by) while another watcher holds it. */
  async #holdLease(): Promise<boolean> {
    if (this.#follower && Date.now() < this.#leaseRenewAt) return true;
    const claim = await this.#claim();
    if (claim.active) {
      this.#standingBy = undefined;
      return true;
    }
    if (this.#follower) this.#log.warn({ holder: claim.holder }, "lost the lease on the chain; standing by");
    else if (this.#standingBy !== claim.holder) this.#log.info({ holder: claim.holder }, "another watcher follows the chain; standing by");
    this.#standingBy = claim.holder;
    this.#drop();
    return false;
  }

  async #refreshWatched(): Promise<void> {
    const full = Date.now() >= this.#resyncAt;
    let cursor = full ? undefined : this.#cursor;
    const fresh = full ? new Set<string>() : this.#watched;
    for (;;) {
      const page = await this.#listWatched(cursor);
      for (const a of page.addresses) fresh.add(a.toLowerCase());
      cursor = page.nextCursor;
      if (!page.hasMore) break;
    }
    if (full) {
      this.#watched.clear();
      for (const a of fresh) this.#watched.add(a);
      this.#resyncAt = Date.now() + resyncMs;
    }
    this.#cursor = cursor;
    this.#m.watched.set(this.#labels, this.#watched.size);
  }

  #listWatched(cursor: string | undefined) {
    return this.#chains.listWatchedAddresses({ network: this.#e.network, cursor, limit: 10_000 }, { headers: this.#headers });
  }

  /** The node, its failures marked as the node's (for the backoff's log line and the RPC error count). */
  #guardedNode(): EvmNode {
    const node = this.#node;
    return {
      chainId: () => this.#nodeCall(() => node.chainId()),
      headHeight: () => this.#nodeCall(() => node.headHeight()),
      block: (h, t) => this.#nodeCall(() => node.block(h, t)),
      tokenTransfers: (c, f, t) => this.#nodeCall(() => node.tokenTransfers(c, f, t)),
      close: () => node.close(),
    };
  }

  #core(): Core {
    const network = this.#e.network;
    const headers = this.#headers;
    return {
      record: async (o, confirmations) => {
        await this.#observations.recordObservation(
          {
            network,
            asset: o.asset,
            toAddress: o.toAddress,
            txHash: o.txHash,
            outputIndex: o.outputIndex,
            amount: o.amount,
            confirmations,
            blockHeight: BigInt(o.blockHeight),
            blockHash: o.blockHash,
            observedAt: timestampFromDate(new Date(o.blockTime * 1000)),
          },
          { headers },
        );
      },
      reorg: async (hashes) => {
        await this.#observations.recordReorg({ network, orphanedBlockHashes: [...hashes] }, { headers });
      },
      save: async (position, head) => {
        // A long step (a catch-up batch full of outputs) may outlast the renewal schedule: renew first,
        // so the save is not refused for a lease that merely ran out while this watcher worked.
        if (Date.now() >= this.#leaseRenewAt && !(await this.#claim()).active) {
          throw new ConnectError("another watcher took the lease on the chain", Code.FailedPrecondition);
        }
        await this.#chains.saveChainPosition(
          {
            network,
            watcherId: this.#id,
            position: { height: BigInt(position.height), recentBlocks: position.recentBlocks.map((b) => ({ height: BigInt(b.height), hash: b.hash })) },
            headHeight: BigInt(head.height),
            headTime: head.time === undefined ? undefined : timestampFromDate(new Date(head.time * 1000)),
          },
          { headers },
        );
        this.#savedAt = Date.now();
        if (head.time !== undefined) this.#m.lagSeconds.set(this.#labels, Math.max(0, Date.now() / 1000 - head.time));
      },
    };
  }
}

/**
 * Start-time check of each endpoint: one that answers with the wrong chain is bad configuration
 * (a Live watcher must follow mainnet; a Test one never does). One that does not answer is not:
 * the watcher retries it, and says so once.
 */
export async function checkEndpoints(endpoints: readonly ChainEndpoint[], mainnetIds: Readonly<Record<string, number>>, logger: Logger): Promise<string | undefined> {
  for (const e of endpoints) {
    const name = `${e.network.toUpperCase()}_${e.environment.toUpperCase()}_RPC_URL`;
    const node = evmNode(e.url, 5000);
    let chainId: number;
    try {
      chainId = await node.chainId();
    } catch (err) {
      logger.warn({ chain: `${e.network}/${e.environment}`, node: redactNodeUrl(e.url), reason: (err as Error).message.split("\n")[0] }, `${name} does not answer; the watcher will keep trying`);
      continue;
    } finally {
      await node.close().catch(() => undefined);
    }
    const mainnet = mainnetIds[e.network];
    if (e.environment === "live" && chainId !== mainnet) return `${name} follows chain id ${chainId}, not ${e.network} mainnet (${mainnet}): Live payments are only watched on mainnet`;
    if (e.environment === "test" && chainId === mainnet) return `${name} follows ${e.network} mainnet (chain id ${chainId}): Test intents are paid on a testnet or a local dev chain`;
  }
  return undefined;
}
