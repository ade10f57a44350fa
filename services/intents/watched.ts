import { followedNetworks } from "../vocabulary/assets.ts";

/**
 * Whether a watcher follows a chain (a network in an environment): the create path asks it for
 * every create, so it answers from memory (chains/coverage.ts keeps it, refreshed in the
 * background). A Live create on a chain nobody follows is refused (network_not_watched); a Test
 * intent there carries a notice that the sandbox simulator pays it.
 */
export interface ChainWatch {
  follows(network: string, environment: "test" | "live"): boolean;
}

/** What the operator sets so that a watcher follows `network` in `environment` (the refusal's and go-live readiness's wording). */
export function howToWatch(network: string, environment: "test" | "live"): string {
  const own = `names ${network} in OPERATOR_WATCHED_NETWORKS once a watcher of their own reports it (ObservationService or ChainService)`;
  if (!(followedNetworks as readonly string[]).includes(network)) return `The operator ${own}.`;
  return `The operator sets ${network.toUpperCase()}_${environment.toUpperCase()}_RPC_URL and runs the watcher role (npm start, or npm start -- watcher), or ${own}.`;
}

/** The notice on an intent whose chain no watcher follows. */
export function unwatchedNotice(network: string, environment: "test" | "live"): string {
  if (environment === "test") {
    return `This server does not watch ${network} in test: a payment sent to deposit_address is not seen. The sandbox simulator pays this intent (POST /api/v1/sandbox/merchants/{merchant}/payment-intents/{payment_intent}/simulate).`;
  }
  return `This server does not watch ${network} in live now: a payment sent to deposit_address is seen only once a watcher follows it again.`;
}
