// The watcher's configuration: endpoints per network and environment, overrides, and what logs may show of a node's URL.
import t from "tap";
import { loadConfig } from "../../services/platform/config.ts";
import { redactNodeUrl } from "../../services/watcher/evm-node.ts";

t.test("chain endpoints are read per network and environment", async (t) => {
  const c = loadConfig({ ETHEREUM_TEST_RPC_URL: "http://127.0.0.1:8545", POLYGON_LIVE_RPC_URL: "https://polygon.example/v2/KEY" });
  t.same(c.chainEndpoints, [
    { network: "ethereum", environment: "test", url: "http://127.0.0.1:8545", witnesses: [], maxResponseBytes: 64 * 1024 * 1024 },
    { network: "polygon", environment: "live", url: "https://polygon.example/v2/KEY", witnesses: [], maxResponseBytes: 64 * 1024 * 1024 },
  ]);
  t.same(loadConfig({}).chainEndpoints, [], "none by default");
  t.throws(() => loadConfig({ ETHEREUM_LIVE_RPC_URL: "ftp://node" }), /ETHEREUM_LIVE_RPC_URL must be an absolute http\(s\) URL of an Ethereum JSON-RPC endpoint, got the scheme ftp/);
  t.throws(
    () => loadConfig({ POLYGON_LIVE_RPC_URL: "wss://polygon.example/ws/KEY" }),
    /POLYGON_LIVE_RPC_URL must be an absolute http\(s\) URL .*got the scheme wss \(nodes are read over http\(s\) only, where each answer is capped by WATCHER_MAX_RESPONSE_BYTES\)/,
    "WebSocket: its messages are not capped",
  );
  t.throws(() => loadConfig({ ETHEREUM_LIVE_RPC_URL: "not a url" }), /ETHEREUM_LIVE_RPC_URL must be an absolute/);
});

t.test("a Bitcoin Core node: http(s) only, its rpcauth user and password in the URL", async (t) => {
  const c = loadConfig({ BITCOIN_LIVE_RPC_URL: "https://watcher:secret@10.0.0.5:8332", ETHEREUM_TEST_RPC_URL: "http://127.0.0.1:8545" });
  t.same(c.chainEndpoints, [
    { network: "bitcoin", environment: "live", url: "https://watcher:secret@10.0.0.5:8332", witnesses: [], maxResponseBytes: 64 * 1024 * 1024 },
    { network: "ethereum", environment: "test", url: "http://127.0.0.1:8545", witnesses: [], maxResponseBytes: 64 * 1024 * 1024 },
  ]);
  t.throws(() => loadConfig({ BITCOIN_TEST_RPC_URL: "ws://127.0.0.1:18443" }), /BITCOIN_TEST_RPC_URL must be an absolute http\(s\) URL of a Bitcoin Core RPC endpoint .*got the scheme ws/);
  t.equal(redactNodeUrl("http://watcher:secret@10.0.0.5:8332/wallet/x"), "http://10.0.0.5:8332", "the password never reaches a log");
});

t.test("a TRON node: its Ethereum-compatible JSON-RPC over http(s) only (java-tron serves it by POST to /jsonrpc)", async (t) => {
  const c = loadConfig({ TRON_TEST_RPC_URL: "http://127.0.0.1:8545/jsonrpc", TRON_LIVE_RPC_URL: "https://tron.example/jsonrpc" });
  t.same(c.chainEndpoints, [
    { network: "tron", environment: "test", url: "http://127.0.0.1:8545/jsonrpc", witnesses: [], maxResponseBytes: 64 * 1024 * 1024 },
    { network: "tron", environment: "live", url: "https://tron.example/jsonrpc", witnesses: [], maxResponseBytes: 64 * 1024 * 1024 },
  ]);
  t.throws(() => loadConfig({ TRON_LIVE_RPC_URL: "wss://tron.example/ws" }), /TRON_LIVE_RPC_URL must be an absolute http\(s\) URL of a TRON node's Ethereum-compatible JSON-RPC endpoint .*got the scheme wss/);
  t.same(loadConfig({ TRON_CONFIRMATIONS: "19" }).confirmationOverrides, { tron: 19 });
});

t.test("several nodes of an EVM or TRON chain, comma-separated: the first is read, the others asked to agree", async (t) => {
  const c = loadConfig({ ETHEREUM_LIVE_RPC_URL: "https://a.example/v2/KEY, https://b.example/rpc,http://127.0.0.1:8545" });
  t.same(c.chainEndpoints[0], {
    network: "ethereum",
    environment: "live",
    url: "https://a.example/v2/KEY",
    witnesses: ["https://b.example/rpc", "http://127.0.0.1:8545"],
    maxResponseBytes: 64 * 1024 * 1024,
  });
  t.same(loadConfig({ TRON_LIVE_RPC_URL: "https://a.example/jsonrpc,https://b.example/jsonrpc" }).chainEndpoints[0]?.witnesses, ["https://b.example/jsonrpc"], "TRON too");
  t.throws(() => loadConfig({ ETHEREUM_LIVE_RPC_URL: "https://a.example,http://b.example:8545" }), /^ETHEREUM_LIVE_RPC_URL must be https to a host other than this machine \(b\.example over http\)/, "each URL is checked");
  t.throws(() => loadConfig({ ETHEREUM_LIVE_RPC_URL: "https://a.example,https://a.example" }), /names the same node twice/, "a node agreeing with itself proves nothing");
  t.throws(() => loadConfig({ BITCOIN_LIVE_RPC_URL: "https://u:p@a.example:8332,https://u:p@b.example:8332" }), /^BITCOIN_LIVE_RPC_URL takes one URL: a bitcoin block's proof of work is checked/, "bitcoin: one node");
  t.throws(() => loadConfig({ ETHEREUM_TEST_RPC_URL: " , " }), /ETHEREUM_TEST_RPC_URL must be an absolute http\(s\) URL/, "no URL at all");
});

t.test("confirmation overrides, poll interval, lease and the late-payment window", async (t) => {
  const c = loadConfig({ ETHEREUM_CONFIRMATIONS: "3", WATCHER_POLL_MS: "250", WATCHER_LEASE_SECONDS: "30", LATE_PAYMENT_WINDOW_SECONDS: "3600" });
  t.same(c.confirmationOverrides, { ethereum: 3 });
  t.equal(c.watcherPollMs, 250);
  t.equal(c.watcherLeaseSeconds, 30);
  t.equal(c.latePaymentWindowSeconds, 3600);
  const d = loadConfig({});
  t.same([d.confirmationOverrides, d.watcherPollMs, d.watcherLeaseSeconds, d.latePaymentWindowSeconds], [{}, 2000, 15, 86_400]);
  t.throws(() => loadConfig({ POLYGON_CONFIRMATIONS: "0" }), /POLYGON_CONFIRMATIONS must be between 1 and 10000/);
});

t.test("base and arbitrum: EVM chains like polygon, their own confirmations and reorg depths, on Live too", async (t) => {
  const c = loadConfig({ BASE_TEST_RPC_URL: "http://127.0.0.1:8545", BASE_LIVE_RPC_URL: "https://a.example/base,https://b.example/base", ARBITRUM_TEST_RPC_URL: "https://arb-sepolia.example/v2/KEY" });
  t.same(c.chainEndpoints, [
    { network: "base", environment: "test", url: "http://127.0.0.1:8545", witnesses: [], maxResponseBytes: 64 * 1024 * 1024 },
    { network: "base", environment: "live", url: "https://a.example/base", witnesses: ["https://b.example/base"], maxResponseBytes: 64 * 1024 * 1024 },
    { network: "arbitrum", environment: "test", url: "https://arb-sepolia.example/v2/KEY", witnesses: [], maxResponseBytes: 64 * 1024 * 1024 },
  ]);
  t.throws(() => loadConfig({ BASE_LIVE_RPC_URL: "http://base.example:8545" }), /^BASE_LIVE_RPC_URL must be https to a host other than this machine/, "Live: https, as on every chain");
  t.same(
    loadConfig({ ARBITRUM_LIVE_RPC_URL: "https://arb1.example/rpc,https://arb1-b.example/rpc" }).chainEndpoints,
    [{ network: "arbitrum", environment: "live", url: "https://arb1.example/rpc", witnesses: ["https://arb1-b.example/rpc"], maxResponseBytes: 64 * 1024 * 1024 }],
    "Live arbitrum: its block 0 is pinned, so a node can prove it serves Arbitrum One",
  );
  t.throws(() => loadConfig({ ARBITRUM_LIVE_RPC_URL: "http://arb1.example:8547" }), /^ARBITRUM_LIVE_RPC_URL must be https to a host other than this machine/);
  const d = loadConfig({});
  t.same([d.maxReorgDepth.base, d.maxReorgDepth.arbitrum], [600, 1000], "the defaults");
  const o = loadConfig({ BASE_CONFIRMATIONS: "12", ARBITRUM_CONFIRMATIONS: "240", BASE_MAX_REORG_DEPTH: "300", ARBITRUM_MAX_REORG_DEPTH: "1000" });
  t.same(o.confirmationOverrides, { base: 12, arbitrum: 240 });
  t.same([o.maxReorgDepth.base, o.maxReorgDepth.arbitrum], [300, 1000]);
  t.throws(() => loadConfig({ ARBITRUM_MAX_REORG_DEPTH: "1001" }), /ARBITRUM_MAX_REORG_DEPTH must be between 1 and 1000/, "the ceiling is the default");
});

t.test("a node's URL in logs: scheme, host and port, never a path, query or userinfo (where providers put keys)", async (t) => {
  t.equal(redactNodeUrl("https://eth-mainnet.example/v2/SECRETKEY"), "https://eth-mainnet.example");
  t.equal(redactNodeUrl("wss://user:pass@node.example:8546/ws?key=SECRET"), "wss://node.example:8546");
  t.equal(redactNodeUrl("nonsense"), "(unparseable URL)");
});
