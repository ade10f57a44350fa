import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import type { Registry } from "prom-client";
import { ChainService } from "../../gen/payments/v1/chains_pb.ts";
import { ObservationService } from "../../gen/payments/v1/observations_pb.ts";
import type { ChainEndpoint } from "../platform/config.ts";
import type { Logger } from "../platform/logger.ts";
import { assets, evmChainIds, findAsset, type AssetInfo } from "../vocabulary/assets.ts";
import { bitcoinNode } from "./bitcoin-node.ts";
import { bitcoinSource, BitcoinWatched } from "./bitcoin-source.ts";
import { evmNode, redactNodeUrl } from "./evm-node.ts";
import { evmSource, EvmWatched } from "./evm-source.ts";
import { Follower, type BlockRef, type ChainSource, type Core } from "./follow.ts";
import { watcherMetrics, type WatcherMetrics } from "./metrics.ts";
import type { WatchedAddresses } from "./watched.ts";

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

/** The node of an endpoint, the source that reads it for the follower, and the watched set it matches against. */
function chainReader(e: ChainEndpoint): { source: ChainSource; watched: WatchedAddresses; close(): Promise<void> } {
  if (e.network === "bitcoin") {
    const node = bitcoinNode(e.url);
    const watched = new BitcoinWatched();
    // Plain HTTP requests: nothing to close.
    return { source: bitcoinSource(node, findAsset("bitcoin", "BTC") as AssetInfo, watched), watched, close: async () => {} };
  }
  const node = evmNode(e.url);
  const watched = new EvmWatched();
  const chainAssets = assets.filter((a) => a.network === e.network).map((info) => ({ info, contract: info.contract?.[e.environment] }));
  return { source: evmSource(node, chainAssets, watched), watched, close: () => node.close() };
}

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
  readonly #source: ChainSource;
  readonly #closeNode: () => Promise<void>;
  readonly #chains;
  readonly #observations;
  readonly #headers: Record<string, string>;
  readonly #log: Logger;
  readonly #watched: WatchedAddresses;
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
    const reader = chainReader(e);
    this.#source = this.#guarded(reader.source);
    this.#watched = reader.watched;
    this.#closeNode = reader.close;
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
    await this.#closeNode().catch(() => undefined);
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
    const head = await this.#source.headHeight();
    this.#m.head.set(this.#labels, head);
    // Addresses after the head: a payment in a block up to it was made to an address handed out before.
    await this.#refreshWatched();
    if (!this.#follower) {
      const claim = await this.#claim();
      const position = claim.position ?? { height: Math.max(0, head - 1), recentBlocks: [] };
      const follower = new Follower(
        {
          source: this.#source,
          core: this.#core(),
          required: claim.required,
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
      this.#follower?.setRequired(claim.required);
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
    // A full re-read replaces the set only once it is complete: a failure halfway keeps the old one.
    const fresh: string[] = [];
    for (;;) {
      const page = await this.#listWatched(cursor);
      if (full) fresh.push(...page.addresses);
      else for (const a of page.addresses) this.#watched.add(a);
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

  /** The source, its failures marked as the node's (for the backoff's log line and the RPC error count). */
  #guarded(source: ChainSource): ChainSource {
    return {
      batchBlocks: source.batchBlocks,
      headHeight: () => this.#nodeCall(() => source.headHeight()),
      hashAt: (h) => this.#nodeCall(() => source.hashAt(h)),
      read: (f, t) => this.#nodeCall(() => source.read(f, t)),
    };
  }

  #core(): Core {
    const network = this.#e.network;
    const headers = this.#headers;
    return {
      record: async (o, confirmations) => {
        const res = await this.#observations.recordObservation(
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
        return res.requiredConfirmations;
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

/** Which chain a node follows, as it says itself: an EVM node's chain id, a bitcoind's `chain`. */
async function chainOf(e: ChainEndpoint): Promise<{ mainnet: boolean; name: string }> {
  if (e.network === "bitcoin") {
    const node = bitcoinNode(e.url, 5000);
    const chain = await node.chain();
    return { mainnet: chain === "main", name: `bitcoin's ${chain} chain` };
  }
  const node = evmNode(e.url, 5000);
  try {
    const chainId = await node.chainId();
    return { mainnet: chainId === evmChainIds[e.network].live, name: `chain id ${chainId}` };
  } finally {
    await node.close().catch(() => undefined);
  }
}

/**
 * Start-time check of each endpoint: one that answers with the wrong chain is bad configuration
 * (a Live watcher must follow mainnet; a Test one never does). One that does not answer is not:
 * the watcher retries it, and says so once.
 */
export async function checkEndpoints(endpoints: readonly ChainEndpoint[], logger: Logger): Promise<string | undefined> {
  for (const e of endpoints) {
    const name = `${e.network.toUpperCase()}_${e.environment.toUpperCase()}_RPC_URL`;
    let chain: { mainnet: boolean; name: string };
    try {
      chain = await chainOf(e);
    } catch (err) {
      logger.warn({ chain: `${e.network}/${e.environment}`, node: redactNodeUrl(e.url), reason: (err as Error).message.split("\n")[0] }, `${name} does not answer; the watcher will keep trying`);
      continue;
    }
    if (e.environment === "live" && !chain.mainnet) return `${name} follows ${chain.name}, not ${e.network} mainnet: Live payments are only watched on mainnet`;
    if (e.environment === "test" && chain.mainnet) return `${name} follows ${e.network} mainnet (${chain.name}): Test intents are paid on a testnet or a local dev chain`;
  }
  return undefined;
}
