import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { Code, ConnectError, type Transport } from "@connectrpc/connect";
import type { Registry } from "prom-client";
import type { ChainEndpoint } from "../platform/config.ts";
import type { Logger } from "../platform/logger.ts";
import { BlockRefused } from "./block-refused.ts";
import { chainReader, type ChainReader } from "./chain-reader.ts";
import { CoreClient, type Claim } from "./core-client.ts";
import { redactNodeUrl } from "./evm-node.ts";
import { Follower, type BlockRef, type ChainSource, type Core, type Output } from "./follow.ts";
import { blocksTaken, reorgWindow } from "../vocabulary/assets.ts";
import { watcherMetrics, type WatcherMetrics } from "./metrics.ts";
import { firstBlockAtOrAfter, refusal } from "./node-check.ts";
import { connectionRefused, untilAccepting } from "./node-probe.ts";
import { sleep } from "./sleep.ts";
import { WatchedSync } from "./watched-sync.ts";
import { agreed, headToRead, Witnesses } from "./witness.ts";

export interface WatcherRoleOptions {
  endpoints: readonly ChainEndpoint[];
  pollMs: number;
  /** How often the mempool is read once caught up (bitcoin; default pollMs): on mainnet getrawmempool answers megabytes. */
  mempoolMs?: number;
  leaseSeconds: number;
  /** How often a followed node proves again which chain it serves. */
  nodeProofSeconds: number;
  /** How the watcher reaches the core in an environment: a transport and the internal credential it sends. */
  coreFor(environment: "test" | "live"): { transport: Transport; credential: string };
  logger: Logger;
  registry: Registry;
}

const maxBackoffMs = 30_000;
/**
 * A node that does not answer is asked again at least this often, however long it has been away:
 * a refused or failed connection costs the node nothing (a retry is the node's proof, three small
 * calls, once it answers), and the watcher is back at work within this of the node's return (a
 * doubling backoff capped at 30 s came back up to 13 s late after a 20 s outage; 1 s, half a
 * second on average). A node that answers wrongly (refused, a block that fails a check) keeps the long backoff.
 * One whose host refuses the connection is also probed every 20 ms meanwhile (node-probe.ts): the
 * retry comes as soon as it accepts one, not up to this much later.
 */
const nodeRetryMaxMs = 250;
/** A watcher with nothing new to save still saves this often. */
const heartbeatMs = 15_000;
/** What a watcher says of its node is said again this often while it stays the same (readiness reads recent words only). */
const reportEveryMs = 30_000;
/** How much older than the oldest watched intent a block may be and still be read on a new chain: block clocks drift (bitcoin allows two hours). */
const blockTimeSlackSeconds = 2 * 3600;

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

/** Which side failed: a call to the node, or to the core. */
class NodeFailure extends Error {
  /** The node's host refused the connection: nothing listens there now (node-probe.ts). */
  readonly refused: boolean;
  constructor(message: string, refused: boolean) {
    super(message);
    this.refused = refused;
  }
}
/**
 * The node answers, but must not be followed (another chain, still syncing, too little work).
 *
 * A block that fails a check (BlockRefused, block-refused.ts) is not this: it is a failure of
 * that read, like a node that does not answer. Nothing of it is reported, the follower keeps its
 * position, the node proves itself again and the read is retried with backoff, so the chain goes
 * on from the real block as soon as the node (or the one a balancer reaches next) serves it, and
 * a node that keeps serving the bad block is never followed past it. NodeRefused would add
 * nothing: its proof (chain name, block 0, chainwork) says nothing of one block, so it would pass
 * at once and the same read would follow.
 */
class NodeRefused extends Error {}
/** The node serves another chain than the blocks in hand were read from (a reset dev chain): start over on it. */
class ChainReplaced extends Error {}
/** The lease changed hands since the follower started (lost, then won back): what it read belongs to the past tenure. */
class TenureEnded extends Error {}
/** The core stopped counting the chain (a fork deeper than its maximum): nothing is read until an operator resumes it. */
class ChainHalted extends Error {}
/**
 * No second node agrees with the node on a batch's last block, or on a transfer in it: nothing of
 * the batch is reported, and it is read again.
 */
class Unwitnessed extends Error {
  readonly height: number;
  readonly hash: string;
  readonly answers: (string | undefined)[];
  /** The transfer no witness told again (txHash:outputIndex), when the blocks were agreed on. */
  readonly transfer: string | undefined;
  constructor(height: number, hash: string, answers: (string | undefined)[], transfer?: Output) {
    super(
      transfer
        ? `no second node confirms the transfer ${transfer.txHash}:${transfer.outputIndex} of ${transfer.amount} ${transfer.asset} to ${transfer.toAddress} in block ${height} (${hash})`
        : `no second node agrees with the node on block ${height} (${hash})`,
    );
    this.height = height;
    this.hash = hash;
    this.answers = answers;
    this.transfer = transfer && `${transfer.txHash}:${transfer.outputIndex}`;
  }
}

class ChainWatch {
  readonly #e: ChainEndpoint;
  readonly #id: string;
  readonly #o: WatcherRoleOptions;
  readonly #m: WatcherMetrics;
  readonly #signal: AbortSignal;
  readonly #labels: { network: string; environment: string };
  readonly #source: ChainSource;
  /** The node and what is read of it; the follower reads through #source, its failures marked as the node's. */
  readonly #reader: ChainReader;
  readonly #core: CoreClient;
  readonly #watched: WatchedSync;
  /** The chain's other nodes, asked to agree on each batch before it is reported (none: the node's word is taken). */
  readonly #witnesses: Witnesses;
  /** Why the last batch was refused for want of a second node's agreement (undefined: agreed since), logged once per disagreement. */
  #unwitnessed: string | undefined;
  readonly #log: Logger;
  #follower: Follower | undefined;
  #leaseRenewAt = 0;
  #failing: string | undefined;
  /** The block last refused (height, hash, check), logged and counted once however often it is served. */
  #refusedBlock: string | undefined;
  #standingBy: string | undefined;
  #savedAt = 0;
  /** The chain the node proved it serves when this process first asked (its name), and its block 0 now. */
  #pinnedChain: string | undefined;
  #genesis: string | undefined;
  /** When the node last proved which chain it serves; 0: prove it before reading anything more. */
  #provenAt = 0;
  /** Why the node is not followed now (undefined: it is), as last logged and reported. */
  #problem: string | undefined;
  #reported: { problem: string | undefined; at: number } | undefined;
  #behind = 0;
  /** The lease epoch this watcher holds the chain under: sent with every report, so one from before a takeover is refused. */
  #epoch: bigint | undefined;
  /** The epoch the current follower started under: a follower reports under its own tenure only. */
  #followerEpoch: bigint | undefined;
  /** What the core said last of a halt of the chain (undefined: it counts), as logged. */
  #halted: { reason: string; depth: number; depthIsLowerBound: boolean } | undefined;
  #haltLogged: string | undefined;
  /** The mempool report last applied by the core (its tip and outputs), and when: one that says the same is sent again only as a heartbeat. */
  #mempoolSent: { key: string; at: number } | undefined;
  /** When the mempool was last read (0: not yet). */
  #mempoolReadAt = 0;
  /** The node said its mempool is not loaded at the last read (said once in the log). */
  #mempoolUnloaded = false;

  constructor(e: ChainEndpoint, id: string, o: WatcherRoleOptions, m: WatcherMetrics, signal: AbortSignal) {
    this.#e = e;
    this.#id = id;
    this.#o = o;
    this.#m = m;
    this.#signal = signal;
    this.#labels = { network: e.network, environment: e.environment };
    this.#reader = chainReader(e);
    this.#source = this.#guarded(this.#reader.source);
    this.#core = new CoreClient(e.network, id, o.coreFor(e.environment));
    this.#watched = new WatchedSync(this.#reader.watched, (cursor) => this.#core.listWatched(cursor));
    this.#witnesses = new Witnesses(e);
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
          this.#refusedBlock = undefined;
        }
        backoff = this.#o.pollMs;
        // Polls start every pollMs, whatever a round took (a slow round is followed at once).
        if (!busy) await sleep(Math.max(0, this.#o.pollMs - (Date.now() - started)), this.#signal);
      } catch (err) {
        if (this.#signal.aborted) break;
        if (err instanceof ChainReplaced || err instanceof TenureEnded || err instanceof ChainHalted) {
          // Nothing read from the old chain, or under the past tenure, is reported; the next round
          // starts on the new chain, from the core's tip, or (stopped) waits for an operator.
          this.#drop();
          continue;
        }
        if (err instanceof NodeRefused) {
          this.#drop();
          this.#m.nodeRefused.set(this.#labels, 1);
          await this.#problemIs(err.message, "warn", "chain watcher refuses its node: nothing it serves is read until it proves itself again");
          await sleep(backoff, this.#signal);
          backoff = Math.min(maxBackoffMs, backoff * 2);
          continue;
        }
        if (err instanceof Unwitnessed) {
          this.#m.unwitnessedHeight.set(this.#labels, err.height);
          // Said once until a second node agrees again: the head moves on while they disagree.
          if (this.#unwitnessed === undefined) {
            if (err.transfer) {
              this.#log.warn(
                { height: err.height, hash: err.hash, transfer: err.transfer, witnesses: err.answers },
                "no second node confirms a transfer the node tells of: nothing of its batch is reported until one does",
              );
            } else {
              this.#log.warn(
                { height: err.height, hash: err.hash, witnesses: err.answers.map((a) => a ?? "no block") },
                "no second node agrees with the node on this block: nothing of it is reported until one does",
              );
            }
          }
          this.#unwitnessed = err.message;
          this.#failing = err.message;
          await this.#report(`${err.message}: nothing of it is counted until a second node agrees`);
          // Read again each poll: agreement usually comes with the witness's next block.
          await sleep(this.#o.pollMs, this.#signal);
          continue;
        }
        if (err instanceof BlockRefused) {
          const key = `${err.height} ${err.hash} ${err.check}`;
          if (this.#refusedBlock !== key) {
            this.#refusedBlock = key;
            this.#m.blocksRefused.inc({ ...this.#labels, check: err.check });
            this.#log.warn(
              { check: err.check, height: err.height, hash: err.hash, reason: err.message, retry_ms: backoff },
              "the node served a block that fails a check: nothing of it is reported; read again with backoff",
            );
          }
          this.#failing = err.message;
          // Whatever answers next proves which chain it serves first (a balancer may reach another node).
          this.#provenAt = 0;
          await this.#report(`the node served a block that fails a check: ${err.message}`);
          await sleep(backoff, this.#signal);
          backoff = Math.min(maxBackoffMs, backoff * 2);
          continue;
        }
        const side = err instanceof NodeFailure ? "node" : "core";
        const reason = `${side}: ${(err as Error).message.split("\n")[0]}`;
        if (side === "node") {
          this.#m.rpcErrors.inc(this.#labels);
          // Whatever answers next, after a reconnection, proves which chain it serves first, and
          // the backlog it has is read in small batches first (its first outputs count sooner).
          this.#provenAt = 0;
          this.#follower?.slowStart();
          await this.#report(`the node does not answer: ${(err as Error).message.split("\n")[0]}`);
        }
        const wait = side === "node" ? Math.min(nodeRetryMaxMs, backoff) : backoff;
        // Once per outage, not once per retry.
        if (this.#failing === undefined) this.#log.warn({ reason, retry_ms: wait }, "chain watcher cannot go on; retrying with backoff");
        this.#failing = reason;
        // Lost the lease, or the core no longer takes this watcher's credential: not following, whatever comes next.
        if (err instanceof ConnectError && [Code.FailedPrecondition, Code.Unauthenticated, Code.PermissionDenied].includes(err.code)) this.#drop();
        // A node that refused the connection is probed meanwhile, and asked again as soon as it accepts one.
        if (err instanceof NodeFailure && err.refused) await untilAccepting(this.#e.url, wait, this.#signal);
        else await sleep(wait, this.#signal);
        backoff = Math.min(maxBackoffMs, backoff * 2);
      }
    }
    this.#m.active.set(this.#labels, 0);
    await this.#reader.close().catch(() => undefined);
    await this.#witnesses.close();
    this.#log.info("chain watcher stopped");
  }

  #drop(): void {
    this.#follower = undefined;
    this.#followerEpoch = undefined;
    this.#mempoolSent = undefined;
    this.#m.active.set(this.#labels, 0);
  }

  async #nodeCall<T>(call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (err) {
      if (err instanceof BlockRefused) throw err;
      throw new NodeFailure((err as Error).message, connectionRefused(err));
    }
  }

  /**
   * Asks the node which chain it serves, when due: before its first block, after any failure
   * (a reconnection may reach another node), every nodeProofSeconds, and before anything is orphaned.
   * Throws NodeRefused when it must not be followed. A Test node whose block 0 changed (a reset
   * dev chain or testnet) serves a new chain: true, and the caller starts over on it.
   */
  async #prove(force = false): Promise<boolean> {
    if (!force && this.#provenAt !== 0 && Date.now() - this.#provenAt < this.#o.nodeProofSeconds * 1000) return false;
    const facts = await this.#nodeCall(() => this.#reader.facts());
    const refused = refusal(this.#e, facts, this.#pinnedChain);
    if (refused) throw new NodeRefused(refused);
    this.#pinnedChain ??= facts.chain;
    this.#m.nodeRefused.set(this.#labels, 0);
    this.#provenAt = Date.now();
    for (const w of await this.#witnesses.prove(this.#pinnedChain)) {
      if (w.refused) this.#log.warn({ witness: w.node, reason: w.refused }, "a second node of the chain is not asked to agree until it proves which chain it serves");
      else this.#log.info({ witness: w.node }, "a second node of the chain is asked to agree on each block");
    }
    const replaced = this.#genesis !== undefined && this.#genesis !== facts.genesisHash;
    this.#genesis = facts.genesisHash;
    return replaced;
  }

  /** One round: prove the node, hold the lease, learn the head and the new addresses, process what is new. True when more is waiting. */
  async #tick(): Promise<boolean> {
    if (await this.#prove()) this.#drop();
    if (!(await this.#holdLease())) return false;
    if (this.#isHalted()) return false;
    // No further than a second node has seen: a node a block ahead of it is waited for, not doubted.
    const nodeHead = await this.#source.headHeight();
    const head = this.#witnesses.size > 0 ? headToRead(nodeHead, await this.#witnesses.head()) : nodeHead;
    this.#m.head.set(this.#labels, head);
    // Addresses after the head: a payment in a block up to it was made to an address handed out before.
    await this.#watched.refresh();
    this.#m.watched.set(this.#labels, this.#watched.size);
    if (!this.#follower) {
      const claim = await this.#claim();
      // Lost between the two claims: a claim that does not win carries no position to start from.
      if (!claim.active) return false;
      const position = await this.#startingPosition(claim, head);
      // A node behind the position is waited for below, once the follower can tell it from a lower branch.
      if (this.#isHalted()) return false;
      const epoch = this.#epoch;
      const follower = new Follower(
        {
          source: this.#source,
          core: this.#reporter(epoch),
          keep: Math.max(claim.position?.recentBlocks.length ?? 0, reorgWindow(claim.maxReorgDepth)),
          // A fork below every block kept is looked for in the core's kept chain, a page at a time.
          bestBefore: (before, count) => this.#core.bestBefore(before, count),
          confirmFork: async () => {
            if (await this.#prove(true)) throw new ChainReplaced();
          },
          onBlock: (b, h) => {
            this.#m.processed.set(this.#labels, b.height);
            this.#m.lagBlocks.set(this.#labels, Math.max(0, h - b.height));
            this.#m.blockProcessed(this.#labels, b.time);
          },
          onOutput: () => this.#m.outputs.inc(this.#labels),
          onReorg: (blocks) => {
            this.#m.reorgs.inc(this.#labels, blocks.length);
            this.#log.warn({ blocks: blocks.map((b) => b.height) }, "blocks left the node's best chain; reading the other branch from where they part");
          },
        },
        position,
      );
      await follower.resume();
      this.#follower = follower;
      this.#followerEpoch = epoch;
      this.#m.active.set(this.#labels, 1);
      this.#log.info({ from: position.height + 1, head }, "following the chain");
    }
    const follower = this.#follower;
    // A lagging node (a load-balanced provider, a standby's own node, a rewound geth) is waited for, never followed back;
    // one whose head is lower on another branch than the one reported is followed to it (lowerBranch).
    await follower.lowerBranch(head);
    if (this.#isBehind(head, follower.position.height)) return false;
    const deadline = Date.now() + Math.max(1000, (this.#o.leaseSeconds * 1000) / 3);
    let busy = true;
    while (busy && Date.now() < deadline && !this.#signal.aborted) busy = await follower.step(head);
    this.#m.lagBlocks.set(this.#labels, Math.max(0, head - follower.position.height));
    // On a quiet chain the saved position doubles as a heartbeat: readiness tells "following" by it.
    if (Date.now() - this.#savedAt > heartbeatMs) await this.#reporter(this.#followerEpoch).report([], { height: head, time: undefined });
    // Caught up: the mempool, read against the tip just reported.
    if (!busy) await this.#readMempool(follower);
    await this.#problemIs(undefined);
    return busy;
  }

  /**
   * Where following starts: the saved position, or just below the head the first time. When
   * the node serves another chain than the saved position's (another block 0), on Test that is a
   * new chain, read from the first block that could pay an intent still watched (the old chain's
   * outputs keep what was recorded of them); on Live it is refused (a Live node serves mainnet).
   */
  async #startingPosition(claim: Claim, head: number): Promise<{ height: number; recentBlocks: BlockRef[]; unreported?: number }> {
    const saved = claim.position;
    if (!saved) {
      const height = Math.max(0, head - 1);
      return { height, recentBlocks: await this.#hashesBelow(height, claim.maxReorgDepth), unreported: height };
    }
    if (saved.genesisHash === undefined || saved.genesisHash === this.#genesis) return saved;
    if (this.#e.environment === "live") throw new NodeRefused(`the node serves a chain whose block 0 is ${this.#genesis}, not the one followed so far (${saved.genesisHash})`);
    let from = head + 1;
    if (claim.oldestWatched !== undefined) {
      const since = claim.oldestWatched.getTime() / 1000 - blockTimeSlackSeconds;
      from = await this.#nodeCall(() => firstBlockAtOrAfter((h) => this.#reader.timeAt(h), head, since));
    }
    // Block 0 holds no payment, and a position is never below it.
    from = Math.max(1, from);
    this.#log.warn(
      { genesis: this.#genesis, previous_genesis: saved.genesisHash, from, head, previous_height: saved.height },
      "the node serves a new chain (another block 0): following it from the first block that could pay a watched intent; what was recorded on the old chain keeps its state",
    );
    // The first report carries the new block 0: the core starts its chain over from it.
    return { height: from - 1, recentBlocks: [] };
  }

  /**
   * The node's hashes of the `depth` + 1 blocks up to `height`, oldest first: a chain followed for
   * the first time has no reported blocks below where following starts, and a fork parting below
   * them is found where it parts (and its depth told to the core) by these.
   */
  async #hashesBelow(height: number, depth: number): Promise<BlockRef[]> {
    // Block 0 is no block a fork replaces (and a proxy may pass another chain's off as it).
    const from = Math.max(1, height - depth);
    const heights = Array.from({ length: Math.max(0, height - from + 1) }, (_, i) => from + i);
    const out: BlockRef[] = [];
    for (let i = 0; i < heights.length; i += 16) {
      const part = heights.slice(i, i + 16);
      const hashes = await Promise.all(part.map((h) => this.#source.hashAt(h)));
      // The head moved back under the read: start without them, as before.
      if (hashes.includes(undefined)) return [];
      out.push(...part.map((h, j) => ({ height: h, hash: hashes[j] as string })));
    }
    return out;
  }

  /**
   * Reads the node's mempool and reports its watched outputs when they changed (or every
   * heartbeatMs; every read while the core counts outputs missing from it): only a complete read
   * of a mempool the node says is loaded, taken at the tip the core has, so that a transaction
   * missing from it was not mined in a block the core has not been told of.
   */
  async #readMempool(follower: Follower): Promise<void> {
    const mempool = this.#reader.mempool;
    // Half a poll's slack: rounds start every pollMs, so a read every poll comes a little less than pollMs apart.
    if (!mempool || Date.now() - this.#mempoolReadAt + this.#o.pollMs / 2 < (this.#o.mempoolMs ?? this.#o.pollMs)) return;
    this.#mempoolReadAt = Date.now();
    const snapshot = await this.#nodeCall(() => mempool.read());
    if (!snapshot) {
      // Restarted and still reading mempool.dat: what it answers says nothing of what left.
      if (!this.#mempoolUnloaded) this.#log.warn("the node has not loaded its mempool yet (getmempoolinfo): its mempool is not reported until it has");
      this.#mempoolUnloaded = true;
      return;
    }
    if (this.#mempoolUnloaded) this.#log.info("the node has loaded its mempool: reported again");
    this.#mempoolUnloaded = false;
    this.#m.mempoolTransactions.set(this.#labels, mempool.size);
    this.#m.mempoolReadSeconds.set(this.#labels, (Date.now() - this.#mempoolReadAt) / 1000);
    const top = follower.position.recentBlocks.at(-1);
    if (!mempool.complete || !top || top.height !== snapshot.tip.height || top.hash !== snapshot.tip.hash) return;
    const key = `${snapshot.tip.hash} ${snapshot.outputs.map((o) => `${o.txHash}:${o.outputIndex}:${o.replaceable ? 1 : 0}`).join(",")} ${snapshot.conflicted.join(",")}`;
    const sent = this.#mempoolSent;
    if (sent && sent.key === key && Date.now() - sent.at < heartbeatMs) return;
    const res = await this.#core.reportMempool(snapshot.tip.hash, snapshot.outputs, snapshot.conflicted, this.#followerEpoch ?? 0n);
    // While outputs are counted missing, each read is a report: MEMPOOL_ABSENT_READS counts them.
    this.#mempoolSent = res.applied && res.absent === 0 ? { key, at: Date.now() } : undefined;
    if (res.rejected > 0) {
      this.#m.rejected.inc(this.#labels, res.rejected);
      this.#log.warn({ rejected: res.rejected }, "the core refused outputs of mempool transactions; passed over (ops rejected-outputs lists them)");
    }
    if (res.withdrawn > 0) {
      this.#log.info({ withdrawn: res.withdrawn, conflicted: snapshot.conflicted.length }, "outputs left the mempool without being mined (a conflicting spend seen, or missing from a loaded mempool long enough): withdrawn");
    }
  }

  /** Whether the node's head is below what was already processed: then nothing is read, and it is said once. */
  #isBehind(head: number, processed: number): boolean {
    const behind = Math.max(0, processed - head);
    this.#m.nodeBehind.set(this.#labels, behind);
    if (behind > 0 && this.#behind === 0) {
      this.#log.warn({ head, processed, behind }, "the node is behind the height already processed; waiting for it to catch up");
    } else if (behind === 0 && this.#behind > 0) {
      this.#log.info({ head }, "the node caught up");
    }
    this.#behind = behind;
    if (behind > 0) void this.#report(`the node's head ${head} is ${behind} blocks behind the height already processed (${processed}); waiting for it to catch up`);
    return behind > 0;
  }

  /** The node's problem now (undefined: none): logged when it changes, and reported to the core for readiness. */
  async #problemIs(problem: string | undefined, level: "warn" | "info" = "info", message?: string): Promise<void> {
    if (problem !== this.#problem) {
      if (problem !== undefined) this.#log[level]({ reason: problem }, message ?? "chain watcher does not follow its node");
      else if (this.#problem !== undefined) this.#log.info({ after: this.#problem }, "the node is followed again");
      this.#problem = problem;
    }
    await this.#report(problem);
  }

  /** Tells the core what this watcher found about its node: when it changes, and again every reportEveryMs. Best effort: the core may be the one down. */
  async #report(problem: string | undefined): Promise<void> {
    const last = this.#reported;
    if (last && last.problem === problem && Date.now() - last.at < reportEveryMs) return;
    this.#reported = { problem, at: Date.now() };
    try {
      await this.#core.reportNode(redactNodeUrl(this.#e.url), problem ?? "");
    } catch {
      this.#reported = undefined;
    }
  }

  async #claim(): Promise<Claim & { epoch: bigint }> {
    const claim = await this.#core.claim(this.#o.leaseSeconds);
    this.#leaseRenewAt = Date.now() + (this.#o.leaseSeconds * 1000) / 3;
    if (claim.active) this.#epoch = claim.epoch;
    this.#halted = claim.halted;
    return claim;
  }

  /**
   * Whether the core holds the chain stopped (a fork deeper than the network's maximum): then
   * nothing is read or reported until an operator resumes it. Said once, in one line, when it
   * stops, and once when it counts again.
   */
  #isHalted(): boolean {
    const halt = this.#halted;
    this.#m.haltedDepth.set(this.#labels, halt?.depth ?? 0);
    this.#m.haltedDepthIsLowerBound.set(this.#labels, halt?.depthIsLowerBound ? 1 : 0);
    if (halt && this.#haltLogged !== halt.reason) {
      this.#log.error(
        { depth: halt.depth, depth_is_lower_bound: halt.depthIsLowerBound, blocks_taken: blocksTaken(halt.depth, halt.depthIsLowerBound), reason: halt.reason },
        "the core stopped counting this chain: a reorg deeper than the maximum followed; check the node, then resume it with ops chain-resume",
      );
    } else if (!halt && this.#haltLogged !== undefined) {
      this.#log.info("an operator resumed the chain: following it again");
    }
    this.#haltLogged = halt?.reason;
    if (halt) this.#drop();
    return halt !== undefined;
  }

  /**
   * Renews the lease when due; false (and standing by) while another watcher holds it. While the
   * node serves a block that fails a check the lease is not renewed (the block is still read again):
   * a standby whose node serves the real block takes over once it lapses, as from a refused node.
   * A report renews it first if this node serves the real block before then.
   */
  async #holdLease(): Promise<boolean> {
    if (this.#follower && (Date.now() < this.#leaseRenewAt || this.#refusedBlock !== undefined)) return true;
    const claim = await this.#claim();
    if (claim.active) {
      this.#standingBy = undefined;
      if (this.#follower && this.#followerEpoch !== claim.epoch) {
        // Lost and won back between two renewals: a new tenure starts from the core's tip with a new follower.
        this.#log.warn({ epoch: Number(claim.epoch) }, "the lease changed hands and came back; following again from the core's tip");
        this.#drop();
      }
      return true;
    }
    if (this.#follower) this.#log.warn({ holder: claim.holder }, "lost the lease on the chain; standing by");
    else if (this.#standingBy !== claim.holder) this.#log.info({ holder: claim.holder }, "another watcher follows the chain; standing by");
    this.#standingBy = claim.holder;
    this.#drop();
    return false;
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

  /** The follower's core: blocks reported under the lease epoch the follower started with, and no other. */
  #reporter(epoch: bigint | undefined): Core {
    return {
      report: async (blocks, head, o) => {
        // A long step (a catch-up batch full of outputs) may outlast the renewal schedule: renew
        // first, so the report is not refused for a lease that merely ran out while this watcher worked.
        if (Date.now() >= this.#leaseRenewAt) {
          const claim = await this.#claim();
          if (!claim.active) throw new ConnectError("another watcher took the lease on the chain", Code.FailedPrecondition);
          if (claim.epoch !== epoch) throw new TenureEnded("the lease changed hands and came back: what was read before is not reported");
        }
        const top = blocks.at(-1);
        if (top && this.#witnesses.size > 0) {
          // The last block's hash, told by a second node: the batch ends on the chain it serves.
          const answers = await this.#witnesses.hashesAt(top.height);
          if (!agreed(top.hash, answers)) throw new Unwitnessed(top.height, top.hash, answers);
          // Every transfer is told again by a witness: the blocks below the top are linked by the read node's word alone.
          const unconfirmed = await this.#witnesses.confirmTransfers(blocks.flatMap((b) => b.outputs));
          if (unconfirmed) throw new Unwitnessed(unconfirmed.output.blockHeight, unconfirmed.output.blockHash, unconfirmed.answers, unconfirmed.output);
          if (this.#unwitnessed !== undefined) this.#log.info({ height: top.height }, "a second node agrees with the node again: its blocks are reported");
          this.#unwitnessed = undefined;
          this.#m.unwitnessedHeight.set(this.#labels, 0);
        }
        let res;
        try {
          res = await this.#core.report(blocks, head, epoch ?? 0n, this.#genesis, o?.forkPointUnknown === true);
        } catch (err) {
          // Refused because the chain stopped: said once by #isHalted, not as a failure each retry.
          if (err instanceof ConnectError && err.code === Code.FailedPrecondition && (await this.#claim()).halted) throw new ChainHalted(err.rawMessage);
          throw err;
        }
        this.#savedAt = Date.now();
        if (res.rejected > 0) {
          // The core kept them with the reason; one output never holds up the chain.
          this.#m.rejected.inc(this.#labels, res.rejected);
          this.#log.warn({ rejected: res.rejected, blocks: blocks.map((b) => b.height) }, "the core refused outputs of these blocks; passed over (ops rejected-outputs lists them)");
        }
        if (res.orphaned > 0) this.#log.warn({ orphaned: res.orphaned, tip: Number(res.tip?.height ?? 0n) }, "the core moved its best chain: outputs of the blocks left behind no longer count");
      },
    };
  }
}

