import t from "tap";
import { follows } from "../../services/chains/coverage.ts";
import { howToWatch, unwatchedNotice } from "../../services/intents/watched.ts";

t.test("a chain is followed when configured here, named by the operator, or reported by a watcher", async (t) => {
  const none = { configured: [], operatorNetworks: [] };
  t.equal(follows(none, new Set(), "ethereum", "live"), false, "nothing configured, nothing reported");
  const here = { configured: [{ network: "ethereum", environment: "test" as const }], operatorNetworks: [] };
  t.equal(follows(here, new Set(), "ethereum", "test"), true, "a built-in watcher configured in this process");
  t.equal(follows(here, new Set(), "ethereum", "live"), false, "for its environment only");
  const operator = { configured: [], operatorNetworks: ["solana"] };
  t.equal(follows(operator, new Set(), "solana", "live"), true, "OPERATOR_WATCHED_NETWORKS: Live");
  t.equal(follows(operator, new Set(), "solana", "test"), true, "and Test");
  t.equal(follows(operator, new Set(), "ethereum", "live"), false, "only the networks it names");
  t.equal(follows(none, new Set(["bitcoin:live"]), "bitcoin", "live"), true, "a watcher of another process reports the chain");
  t.equal(follows(none, new Set(["bitcoin:live"]), "bitcoin", "test"), false, "not another environment's");
});

t.test("what the operator sets, and the notice", async (t) => {
  t.equal(
    howToWatch("bitcoin", "live"),
    "The operator sets BITCOIN_LIVE_RPC_URL and runs the watcher role (npm start, or npm start -- watcher), or names bitcoin in OPERATOR_WATCHED_NETWORKS once a watcher of their own reports it (ObservationService or ChainService).",
  );
  t.match(howToWatch("base", "live"), "The operator sets BASE_LIVE_RPC_URL and runs the watcher role", "base: a built-in network like the others");
  t.match(howToWatch("arbitrum", "test"), "The operator sets ARBITRUM_TEST_RPC_URL", "arbitrum on Test: its node");
  t.match(howToWatch("arbitrum", "live"), "The operator sets ARBITRUM_LIVE_RPC_URL and runs the watcher role", "arbitrum on Live: its node, as every built-in network");
  t.equal(howToWatch("solana", "live"), "The operator names solana in OPERATOR_WATCHED_NETWORKS once a watcher of their own reports it (ObservationService or ChainService).", "no built-in watcher: only the operator's own");
  t.match(unwatchedNotice("solana", "test"), /does not watch solana in test.*sandbox simulator pays this intent/);
  t.notMatch(unwatchedNotice("solana", "live"), /sandbox/, "Live is never paid by the sandbox");
});
