import type { EntityManager } from "../platform/db.ts";
import type { Logger } from "../platform/logger.ts";
import type { ChainWatch } from "../intents/watched.ts";

/**
 * Which chains (a network in an environment) a watcher follows, for the create path: a Live
 * create on a chain nobody follows would take a shopper's money with nobody looking, so it is
 * refused (network_not_watched); a Test one is created with a notice (the sandbox pays it).
 *
 * A chain is followed when any of these holds:
 * - this process is configured with a built-in watcher for it (<NETWORK>_<ENVIRONMENT>_RPC_URL),
 *   whether or not the watcher role runs here;
 * - the operator names its network in OPERATOR_WATCHED_NETWORKS (a watcher of their own,
 *   reporting through ObservationService or ChainService), in both environments;
 * - a watcher, in any process, saved its position on it within followingWithinMs (its
 *   chain_watchers row), or the chain is stopped by a reorg deeper than its maximum (its
 *   watcher waits for the operator; nothing is lost meanwhile). A gateway and rpc process
 *   without RPC URLs beside a watcher process with them takes Live creates this way.
 * The rows are read every refreshMs in the background, never on the create path.
 */

/** A watcher that saved its position within this long is following its chain (go-live readiness says the same). */
export const followingWithinMs = 120_000;

/** How often the chains watchers report are read again. */
export const coverageRefreshMs = 5_000;

export type ChainEnvironment = "test" | "live";

export interface CoverageSources {
  /** The built-in watchers configured in this process. */
  configured: readonly { network: string; environment: ChainEnvironment }[];
  /** OPERATOR_WATCHED_NETWORKS. */
  operatorNetworks: readonly string[];
}

const chainKey = (network: string, environment: string) => `${network}:${environment}`;

/** Whether a watcher follows the chain, given the process's settings and the chains watchers report (`reported`, keyed network:environment). */
export function follows(sources: CoverageSources, reported: ReadonlySet<string>, network: string, environment: ChainEnvironment): boolean {
  return (
    sources.operatorNetworks.includes(network) ||
    sources.configured.some((e) => e.network === network && e.environment === environment) ||
    reported.has(chainKey(network, environment))
  );
}

/** The chains watchers report now: one query, read by the refresh loop. */
export async function reportedChains(em: EntityManager): Promise<Set<string>> {
  const rows = await em.execute<{ network: string; environment: string }[]>(
    `select network, environment from chain_watchers
      where halted_depth is not null or saved_at > now() - make_interval(secs => ?)`,
    [followingWithinMs / 1000],
  );
  return new Set(rows.map((r) => chainKey(r.network, r.environment)));
}

/** The create path's view of which chains are followed: a set lookup, refreshed in the background. */
export class ChainCoverage implements ChainWatch {
  readonly sources: CoverageSources;
  #reported: ReadonlySet<string> = new Set();
  #timer: NodeJS.Timeout | undefined;

  constructor(sources: CoverageSources) {
    this.sources = sources;
  }

  follows(network: string, environment: ChainEnvironment): boolean {
    return follows(this.sources, this.#reported, network, environment);
  }

  /** Reads the reported chains now. */
  async refresh(em: EntityManager): Promise<void> {
    this.#reported = await reportedChains(em);
  }

  /**
   * Reads them once (so the first creates already see a watcher of another process), then every
   * `everyMs`; a failed read keeps the last set and is logged once until one succeeds.
   */
  async start(em: () => EntityManager, logger: Logger, everyMs = coverageRefreshMs): Promise<void> {
    let failing = false;
    const read = async () => {
      try {
        await this.refresh(em());
        failing = false;
      } catch (err) {
        if (!failing) logger.warn({ err }, "could not read which chains watchers follow; keeping the last answer");
        failing = true;
      }
    };
    await read();
    let running = false;
    this.#timer = setInterval(() => {
      if (running) return;
      running = true;
      void read().finally(() => (running = false));
    }, everyMs);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }
}
