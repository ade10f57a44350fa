import { Counter, Gauge, type Registry } from "prom-client";

/** The watcher role's series, per chain (network and environment). */
export function watcherMetrics(registry: Registry) {
  const labelNames = ["network", "environment"] as const;
  const registers = [registry];
  return {
    head: new Gauge({ name: "chain_head_height", help: "The chain's head as the watcher last saw it.", labelNames, registers }),
    processed: new Gauge({ name: "chain_processed_height", help: "The highest block the watcher has processed.", labelNames, registers }),
    lagBlocks: new Gauge({ name: "chain_lag_blocks", help: "Blocks between the head and the last processed block.", labelNames, registers }),
    lagSeconds: new Gauge({ name: "chain_lag_seconds", help: "Seconds since the last processed block was mined.", labelNames, registers }),
    active: new Gauge({ name: "chain_watcher_active", help: "1 while this process holds the chain's lease and follows it.", labelNames, registers }),
    watched: new Gauge({ name: "chain_watched_addresses", help: "Deposit addresses the watcher looks for.", labelNames, registers }),
    rpcErrors: new Counter({ name: "chain_rpc_errors_total", help: "Failed calls to the chain's node.", labelNames, registers }),
    outputs: new Counter({ name: "chain_observations_reported_total", help: "Outputs to watched addresses reported to the core (first sight, not confirmation updates).", labelNames, registers }),
    reorgs: new Counter({ name: "chain_reorged_blocks_total", help: "Blocks that left the best chain after the watcher processed them.", labelNames, registers }),
  };
}
export type WatcherMetrics = ReturnType<typeof watcherMetrics>;
