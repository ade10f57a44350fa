import { defineEntity, p, type InferEntity } from "@mikro-orm/core";

/**
 * One row per chain (a network in an environment) that a watcher follows: who holds the lease
 * on following it, and the durable position the active watcher saved (every block up to
 * `height` processed; `recent_blocks`, oldest first, to tell a reorg after a restart).
 */
export const ChainWatcher = defineEntity({
  name: "ChainWatcher",
  tableName: "chain_watchers",
  properties: {
    network: p.string().length(32).primary(),
    environment: p.string().length(8).primary(),
    holder: p.string().length(100),
    leaseExpiresAt: p.datetime().length(3),
    height: p.bigint("number").nullable(),
    recentBlocks: p.json<{ height: number; hash: string }[]>().nullable(),
    headHeight: p.bigint("number").nullable(),
    headTime: p.datetime().length(3).nullable(),
    savedAt: p.datetime().length(3).nullable(),
    genesisHash: p.string().length(66).nullable(),
    /** Grows with each takeover by another watcher: reports carry it, and one from a past epoch is refused. */
    epoch: p.bigint("number").default(1),
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
