import { defineEntity, p, type InferEntity } from "@mikro-orm/core";

/**
 * What the chain watcher (or the sandbox) saw: one transaction output to an
 * address, at most one row per (network, environment, tx_hash, output_index): a chain is a
 * network in an environment (mainnet for Live, a testnet or dev chain for Test). `counted`
 * and `counted_late` are decided by the intent's settlement, under its row lock.
 */
export const ChainObservation = defineEntity({
  name: "ChainObservation",
  tableName: "chain_observations",
  properties: {
    id: p.bigint("number").primary().autoincrement(),
    network: p.string().length(32),
    environment: p.string().length(8),
    asset: p.string().length(16),
    toAddress: p.string().length(128),
    txHash: p.string().length(128),
    outputIndex: p.integer(),
    amount: p.decimal("string").columnType("numeric"),
    confirmations: p.integer(),
    blockHeight: p.bigint("number").nullable(),
    blockHash: p.string().length(128).nullable(),
    observedAt: p.datetime().length(3),
    paymentIntentId: p.string().nullable(),
    orphaned: p.boolean().default(false),
    /** Funds that count toward the intent: its asset, at the network's threshold, not orphaned. */
    counted: p.boolean().default(false),
    /** Counted after the intent had expired: what makes it late. */
    countedLate: p.boolean().default(false),
    /** Made by the sandbox simulator. */
    simulated: p.boolean().default(false),
    /** Seen in the node's mempool, in no block yet (orphaned too: withdrawn, it left the mempool unmined). */
    mempool: p.boolean().default(false),
    /** Its transaction signalled replace-by-fee (BIP 125) when seen in the mempool. */
    replaceable: p.boolean().default(false),
    /** Bitcoin: its transaction's bytes without witnesses, as the watcher read them from its block (a refund's PSBT carries them); on one output of each transaction. */
    rawTransaction: p.blob().nullable(),
    /** A live mempool output missing from the mempool's reports: when it was first missing (null: in the last report). */
    mempoolAbsentSince: p.datetime().length(3).nullable(),
    /** And from how many consecutive reports (mempool.ts decides when that withdraws it). */
    mempoolAbsentReads: p.integer().default(0),
    /** When the merchant was told it can never count for its intent (payment.exception: another asset), once. */
    exceptionReportedAt: p.datetime().length(3).nullable(),
    /** A fiat-priced intent's output of its asset: its value in the price currency when first seen (settle.ts). */
    fiatValue: p.decimal("string").columnType("numeric").nullable(),
    /** Its value at the market's rate when it first counted (settle.ts), for the books; null without a fresh rate then. */
    fiatValueConfirmed: p.decimal("string").columnType("numeric").nullable(),
    createdAt: p.datetime().length(3),
    updatedAt: p.datetime().length(3),
  },
  indexes: [
    { properties: ["network", "environment", "blockHash"] },
    { properties: ["network", "environment", "blockHeight"] },
    { properties: ["network", "environment", "toAddress"] },
    { properties: ["paymentIntentId", "createdAt", "id"] },
    // The live mempool outputs a mempool report is checked against (mempool.ts).
    { name: "chain_observations_mempool_index", properties: ["network", "environment"], where: `"mempool" and not "orphaned"` },
  ],
  uniques: [{ properties: ["network", "environment", "txHash", "outputIndex"] }],
});
export type ChainObservation = InferEntity<typeof ChainObservation>;

/**
 * An output a watcher reported that the core could not accept (an amount out of range, a
 * malformed address, an output that changed its address, asset or amount), kept with the reason
 * so an operator can see it; the rest of the watcher's chain goes on without it.
 */
export const RejectedObservation = defineEntity({
  name: "RejectedObservation",
  tableName: "chain_rejected_observations",
  properties: {
    network: p.string().length(32).primary(),
    environment: p.string().length(8).primary(),
    txHash: p.string().length(200).primary(),
    outputIndex: p.integer().primary(),
    asset: p.string().length(32),
    toAddress: p.string().length(200),
    amount: p.string().length(200),
    blockHash: p.string().length(200).nullable(),
    reason: p.string().length(500),
    firstAt: p.datetime().length(3),
    /** Past REJECTED_OUTPUT_RETENTION from it the rejection is removed (indexed for the retention job). */
    lastAt: p.datetime().length(3).index(),
    reports: p.integer().default(1),
  },
});
export type RejectedObservation = InferEntity<typeof RejectedObservation>;
