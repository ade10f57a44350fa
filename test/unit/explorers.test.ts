// Where the dashboard links a transaction (services/vocabulary/explorers.ts): the built-in
// explorers per network and environment, EXPLORER_TX_URLS over them, a malformed entry refused.
import t from "tap";
import { explorersFrom, explorerUrl } from "../../services/vocabulary/explorers.ts";
import { loadConfig } from "../../services/platform/config.ts";

t.test("built in: Live and Test explorers of each followed network", async (t) => {
  const x = explorersFrom(undefined);
  t.equal(explorerUrl(x, "ethereum", "live", "0xab"), "https://etherscan.io/tx/0xab");
  t.equal(explorerUrl(x, "ethereum", "test", "0xab"), "https://sepolia.etherscan.io/tx/0xab");
  t.equal(explorerUrl(x, "bitcoin", "test", "cd"), "https://mempool.space/testnet4/tx/cd");
  t.equal(explorerUrl(x, "tron", "live", "ef"), "https://tronscan.org/#/transaction/ef");
  t.equal(explorerUrl(x, "dogecoin", "live", "ef"), undefined, "none for a network it does not know");
});

t.test("EXPLORER_TX_URLS replaces one, keeps the rest; a malformed entry stops the start, naming it", async (t) => {
  const x = explorersFrom("ethereum.live=https://explorer.internal/tx/{tx}");
  t.equal(explorerUrl(x, "ethereum", "live", "0xab"), "https://explorer.internal/tx/0xab");
  t.equal(explorerUrl(x, "polygon", "live", "0xab"), "https://polygonscan.com/tx/0xab");
  t.throws(() => explorersFrom("ethereum.live=http://explorer.internal/tx/{tx}"), /EXPLORER_TX_URLS: "ethereum.live=http:/);
  t.throws(() => explorersFrom("ethereum.live=https://explorer.internal/tx/"), /network\.live\|test=https/, "no {tx}");
  t.throws(() => loadConfig({ EXPLORER_TX_URLS: "nonsense" }), /EXPLORER_TX_URLS: "nonsense"/);
});
