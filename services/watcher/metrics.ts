import { Counter, Gauge, type Registry } from "prom-client";

type Labels = { network: string; environment: string };

/** The watcher role's series, per chain (network and environment). */
export function watcherMetrics(registry: Registry) {
  const labelNames = ["network", "environment"] as const;
  const registers = [registry];
  /** When each chain's last processed block was mined (seconds): the lag is read from it at each scrape, so it grows while nothing is processed. */
  const processedBlockTimes = new Map<string, { labels: Labels; time: number }>();
  return {
    head: new Gauge({ name: "chain_head_height", help: "The chain's head as the watcher last saw it.", labelNames, registers }),
    processed: new Gauge({ name: "chain_processed_height", help: "The highest block the watcher has processed.", labelNames, registers }),
    lagBlocks: new Gauge({ name: "chain_lag_blocks", help: "Blocks between the head and the last processed block.", labelNames, registers }),
    lagSeconds: new Gauge({
      name: "chain_lag_seconds",
      help: "Seconds since the last processed block was mined, at the time of the scrape: it keeps growing while the node does not answer.",
      labelNames,
      registers,
      collect() {
        for (const { labels, time } of processedBlockTimes.values()) this.set(labels, Math.max(0, Date.now() / 1000 - time));
      },
    }),
    active: new Gauge({ name: "chain_watcher_active", help: "1 while this process holds the chain's lease and follows it.", labelNames, registers }),
    nodeRefused: new Gauge({ name: "chain_node_refused", help: "1 while the watcher refuses its node: another chain than the one it must follow, or still syncing.", labelNames, registers }),
    nodeBehind: new Gauge({ name: "chain_node_behind_blocks", help: "How far the node's head is below the height already processed (0: not behind); the watcher waits while it is.", labelNames, registers }),
    watched: new Gauge({ name: "chain_watched_addresses", help: "Deposit addresses the watcher looks for.", labelNames, registers }),
    blocksRefused: new Counter({
      name: "chain_blocks_refused_total",
      help: "Blocks the node served that failed a check (check: header, proof_of_work, merkle_root, duplicate_tx, witness_commitment, target, checkpoint, logs_bloom), counted once per block: nothing of them is reported, and the read is tried again.",
      labelNames: ["network", "environment", "check"] as const,
      registers,
    }),
    rpcErrors: new Counter({ name: "chain_rpc_errors_total", help: "Failed calls to the chain's node.", labelNames, registers }),
    outputs: new Counter({ name: "chain_observations_reported_total", help: "Outputs to watched addresses reported to the core (first sight, not confirmation updates).", labelNames, registers }),
    rejected: new Counter({ name: "chain_observations_rejected_total", help: "Outputs the core refused (an amount out of range, a malformed address…): kept by the core with the reason, and passed over.", labelNames, registers }),
    mempoolTransactions: new Gauge({ name: "chain_mempool_transactions", help: "Transactions in the node's mempool at the watcher's last read (bitcoin).", labelNames, registers }),
    mempoolReadSeconds: new Gauge({
      name: "chain_mempool_read_seconds",
      help: "How long the watcher's last read of the node's mempool took (getrawmempool, and getrawtransaction for each transaction new to it).",
      labelNames,
      registers,
    }),
    haltedDepth: new Gauge({
      name: "chain_halted_reorg_depth",
      help: "While the core counts nothing on the chain because a fork would take more blocks off its best chain than the network's maximum: how many (at least that many when chain_halted_reorg_depth_is_lower_bound is 1); 0 while it counts. ops chain-resume lifts it.",
      labelNames,
      registers,
    }),
    haltedDepthIsLowerBound: new Gauge({
      name: "chain_halted_reorg_depth_is_lower_bound",
      help: "1 while chain_halted_reorg_depth is a lower bound: the fork parts below every block the watcher and the core knew of the chain, so it is at least that deep; 0 when the depth is exact or the chain counts.",
      labelNames,
      registers,
    }),
    unwitnessedHeight: new Gauge({
      name: "chain_unwitnessed_height",
      help: "The height of a block the node serves that no second node of the chain (<NETWORK>_<ENVIRONMENT>_RPC_URL's further URLs) agrees with: nothing of it is reported while it is above 0.",
      labelNames,
      registers,
    }),
    reorgs: new Counter({ name: "chain_reorged_blocks_total", help: "Blocks that left the best chain after the watcher processed them.", labelNames, registers }),
    /** Records when the chain's newest processed block was mined. */
    blockProcessed(labels: Labels, time: number): void {
      processedBlockTimes.set(`${labels.network}/${labels.environment}`, { labels, time });
    },
  };
}
export type WatcherMetrics = ReturnType<typeof watcherMetrics>;
