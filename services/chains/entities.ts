import { defineEntity, p, type InferEntity } from "@mikro-orm/core";

/**
 * One row per chain (a network in an environment) that a watcher follows: who holds the lease
 * on following it, and the durable position the active watcher saved (every block up to
 * `height` reported: the core's best tip, kept in chain_blocks). `recent_blocks` is what watchers
 * saved before the core kept the chain (chain_blocks was seeded from it); nothing writes it now.
 */
export const ChainWatcher = defineEntity({
  name: "ChainWatcher",
  tableName: "chain_watchers",
  properties: {
    network: p.string().length(32).primary(),
    environment: p.string().length(8).primary(),
    holder: p.string().length(100),
    /** The internal credential that claimed the lease: a report is admitted only under it (with the holder's id and an unexpired lease). */
    credentialId: p.string().length(64).nullable(),
    leaseExpiresAt: p.datetime().length(3),
    height: p.bigint("number").nullable(),
    recentBlocks: p.json<{ height: number; hash: string }[]>().nullable(),
    headHeight: p.bigint("number").nullable(),
    headTime: p.datetime().length(3).nullable(),
    savedAt: p.datetime().length(3).nullable(),
    genesisHash: p.string().length(66).nullable(),
    /** Grows with each takeover by another watcher: reports carry it, and one from a past epoch is refused. */
    epoch: p.bigint("number").defaultRaw("1"),
    /** Set when a reorg deeper than the network's maximum was refused: the chain counts nothing until an operator resumes it. */
    haltedDepth: p.integer().nullable(),
    /** The fork parts below every block the watcher and the core knew of the chain: haltedDepth is a lower bound. */
    haltedDepthIsLowerBound: p.boolean().default(false),
    haltedAt: p.datetime().length(3).nullable(),
    /** What stopped the chain, in an operator's words: the blocks that would leave and where the branches part. */
    haltedReason: p.string().length(500).nullable(),
    /**
     * The lowest block of the branch that stopped the chain (just above where it parts from the
     * best chain): what a resume is given for.
     */
    haltedBranchHeight: p.bigint("number").nullable(),
    haltedBranchHash: p.string().length(200).nullable(),
    /**
     * An operator resumed the chain after a halt (ops chain-resume): the fork that stopped it is
     * taken whatever its depth, once. Spent on that stop only: cleared when the best chain next
     * changes (by that fork, or by blocks that go on without it) or at acceptReorgUntil, and the
     * fork taken must hold the halted branch's lowest block (acceptReorgHeight, acceptReorgHash;
     * null for a halt recorded before these were).
     */
    acceptReorg: p.boolean().default(false),
    acceptReorgHeight: p.bigint("number").nullable(),
    acceptReorgHash: p.string().length(200).nullable(),
    acceptReorgUntil: p.datetime().length(3).nullable(),
  },
});
export type ChainWatcher = InferEntity<typeof ChainWatcher>;

/** What each watcher last said of its node: which node, and why it does not follow it (null: it does). */
export const ChainNodeReport = defineEntity({
  name: "ChainNodeReport",
  tableName: "chain_node_reports",
  properties: {
    network: p.string().length(32).primary(),
    environment: p.string().length(8).primary(),
    watcherId: p.string().length(100).primary(),
    node: p.string().length(200),
    problem: p.string().length(500).nullable(),
    reportedAt: p.datetime().length(3),
  },
});
export type ChainNodeReport = InferEntity<typeof ChainNodeReport>;

/**
 * The blocks of a chain as its watcher reported them, by hash: the core's own copy of the chain
 * (as NBXplorer keeps one). `best` marks the best chain the core follows; a fork clears it on the
 * blocks left behind and sets it on those that come back. Outputs count by their block's place on
 * it. Blocks far below the tip are pruned: nothing that deep can be forked away.
 */
export const ChainBlock = defineEntity({
  name: "ChainBlock",
  tableName: "chain_blocks",
  properties: {
    network: p.string().length(32).primary(),
    environment: p.string().length(8).primary(),
    hash: p.string().length(200).primary(),
    height: p.bigint("number"),
    /** Null only for blocks carried over from a watcher's saved position, which had no parent hash. */
    parentHash: p.string().length(200).nullable(),
    time: p.datetime().length(3).nullable(),
    best: p.boolean(),
    reportedAt: p.datetime().length(3),
    /** The chain's work up to this block (bitcoin: the watcher's sum of its headers' work above its checkpoint, as a number); null where the chain is chosen by height (EVM, bitcoin test networks without a header chain). */
    work: p.decimal("string").precision(80).scale(0).nullable(),
    /**
     * A side branch's block (not best) keeps the outputs reported in it here, until its branch
     * becomes best: they are recorded then. The same transaction is often in both branches, and
     * recording it against the side block would take it off the best chain's.
     */
    sideOutputs: p.json<unknown[]>().nullable(),
  },
  indexes: [{ properties: ["network", "environment", "best", "height"] }],
});
export type ChainBlock = InferEntity<typeof ChainBlock>;
