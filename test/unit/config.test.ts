import t from "tap";
import path from "node:path";
import { ConfigError, loadConfig, parseRetryDelays } from "../../services/platform/config.ts";
import { natsServers } from "../../services/platform/nats.ts";

type Asserts = Pick<typeof t, "ok" | "match" | "fail">;

/** Asserts loadConfig(env) throws a ConfigError whose message matches `message`. */
function refuses(t: Asserts, env: Record<string, string>, message: RegExp, name: string): void {
  try {
    loadConfig(env);
    t.fail(`${name}: expected a ConfigError`);
  } catch (err) {
    t.ok(err instanceof ConfigError, `${name}: throws a ConfigError`);
    t.match((err as Error).message, message, `${name}: message names the problem`);
  }
}

t.test("HOST opens the REST gateway only: the rpc and ops listeners stay on loopback unless named", async (t) => {
  const open = loadConfig({ HOST: "0.0.0.0" });
  t.equal(open.host, "0.0.0.0");
  t.equal(open.rpcHost, "127.0.0.1", "RPC_HOST does not follow HOST");
  t.equal(open.opsHost, "127.0.0.1", "OPS_HOST does not follow HOST");
  t.equal(open.rpcUrl, "http://127.0.0.1:8081");
  const named = loadConfig({ HOST: "0.0.0.0", RPC_HOST: "10.0.0.5", OPS_HOST: "0.0.0.0", RPC_PORT: "9000" });
  t.equal(named.rpcHost, "10.0.0.5");
  t.equal(named.opsHost, "0.0.0.0");
  t.equal(named.rpcUrl, "http://10.0.0.5:9000", "a gateway beside it reaches the rpc port where it listens");
  t.equal(loadConfig({ RPC_HOST: "::" }).rpcUrl, "http://127.0.0.1:8081", "a wildcard is reached on loopback");
  t.equal(loadConfig({ RPC_HOST: "::1" }).rpcUrl, "http://[::1]:8081", "an IPv6 address in brackets");
  t.equal(loadConfig({ RPC_HOST: "10.0.0.5", RPC_URL: "http://rpc.internal:8081" }).rpcUrl, "http://rpc.internal:8081", "RPC_URL still wins");
});

t.test("the recovery bounds are read and checked", async (t) => {
  t.same(loadConfig({ WEBHOOK_RECOVERY_MAX_DAYS: "30", WEBHOOK_RECOVERY_MAX_EVENTS: "5", WEBHOOK_RECOVERY_PAGE_SIZE: "2" }).webhookRecovery, { maxDays: 30, maxEvents: 5, pageSize: 2 });
  refuses(t, { WEBHOOK_RECOVERY_MAX_DAYS: "0" }, /WEBHOOK_RECOVERY_MAX_DAYS/, "no window at all");
  refuses(t, { WEBHOOK_RECOVERY_PAGE_SIZE: "20000" }, /WEBHOOK_RECOVERY_PAGE_SIZE/, "a page too large for one transaction");
});

t.test("defaults", async (t) => {
  const config = loadConfig({});
  t.equal(config.port, 8080);
  t.equal(config.rpcPort, 8081);
  t.equal(config.opsPort, 9464);
  t.equal(config.rpcUrl, "http://127.0.0.1:8081");
  t.equal(config.host, "127.0.0.1");
  t.equal(config.rpcHost, "127.0.0.1");
  t.equal(config.opsHost, "127.0.0.1");
  t.same(config.webhookRecovery, { maxDays: 7, maxEvents: 100_000, pageSize: 1000 }, "a recovery of missed events: 7 days, 100 000 events, pages of 1000");
  t.equal(config.publicBaseUrl, "http://localhost:8080");
  t.equal(config.checkoutBaseUrl, "http://localhost:8080/checkout");
  t.equal(config.jetstreamPrefix, undefined, "unset: the installation's own prefix");
  t.same(config.webhookRetryDelaysSeconds, [60, 300, 1800, 7200, 43200]);
  t.equal(config.webhookMaxAttempts, 6);
  t.equal(config.webhookTimeoutMs, 10_000);
  t.equal(config.databaseUrl, undefined);
  t.equal(config.natsUrl, undefined);
  t.equal(config.jetstreamReplicas, 1, "one replica unless asked");
  t.same(config.webhookConnectTo, []);
  t.equal(config.secretEncryptionKey, undefined);
  t.equal(config.dataDir, path.resolve(".data"));
  t.equal(config.logLevel, "info");
  t.equal(config.bodyLimitBytes, 1024 * 1024);
  t.equal(config.dbPoolSize, 10);
});

t.test("empty or blank values fall back to defaults", async (t) => {
  const config = loadConfig({
    PORT: "",
    DATABASE_URL: "   ",
    JETSTREAM_PREFIX: " ",
    WEBHOOK_RETRY_DELAYS: "  ",
    PUBLIC_BASE_URL: "",
    SECRET_ENCRYPTION_KEY: "",
  });
  t.equal(config.port, 8080);
  t.equal(config.databaseUrl, undefined);
  t.equal(config.jetstreamPrefix, undefined, "unset: the installation's own prefix");
  t.same(config.webhookRetryDelaysSeconds, [60, 300, 1800, 7200, 43200]);
  t.equal(config.publicBaseUrl, "http://localhost:8080");
  t.equal(config.secretEncryptionKey, undefined);
});

t.test("values are read", async (t) => {
  const hexKey = "0123456789abcdef".repeat(4);
  const config = loadConfig({
    PORT: " 3000 ",
    RPC_PORT: "3001",
    OPS_PORT: "0",
    DATABASE_URL: "postgres://u@h/db",
    PUBLIC_BASE_URL: "https://pay.example.com/",
    WEBHOOK_RETRY_DELAYS: "1, 2 ,3",
    WEBHOOK_MAX_ATTEMPTS: "4",
    JETSTREAM_PREFIX: "pay_ments-2",
    SECRET_ENCRYPTION_KEY: hexKey,
    DATA_DIR: "/tmp/pi-data",
  });
  t.equal(config.port, 3000, "PORT trimmed");
  t.equal(config.rpcPort, 3001);
  t.equal(config.rpcUrl, "http://127.0.0.1:3001", "rpc URL follows RPC_PORT");
  t.equal(config.opsPort, 0, "port 0 allowed");
  t.equal(config.databaseUrl, "postgres://u@h/db");
  t.equal(config.publicBaseUrl, "https://pay.example.com", "trailing slash removed");
  t.equal(config.checkoutBaseUrl, "https://pay.example.com/checkout", "checkout follows the public URL");
  t.same(config.webhookRetryDelaysSeconds, [1, 2, 3]);
  t.equal(config.webhookMaxAttempts, 4);
  t.equal(config.jetstreamPrefix, "pay_ments-2");
  t.same(config.secretEncryptionKey, Buffer.from(hexKey, "hex"));
  t.equal(config.dataDir, "/tmp/pi-data");
});

t.test("PORT", async (t) => {
  refuses(t, { PORT: "abc" }, /^PORT\b.*whole number/, "PORT=abc");
  refuses(t, { PORT: "70000" }, /^PORT\b.*between 0 and 65535/, "PORT=70000");
  refuses(t, { PORT: "65536" }, /^PORT\b/, "PORT=65536");
  refuses(t, { PORT: "-1" }, /^PORT\b/, "PORT=-1");
  refuses(t, { PORT: "80.5" }, /^PORT\b/, "PORT=80.5");
  refuses(t, { PORT: "1e3" }, /^PORT\b/, "PORT=1e3");
  refuses(t, { PORT: "0x50" }, /^PORT\b/, "PORT=0x50");
  t.equal(loadConfig({ PORT: "65535" }).port, 65535, "65535 allowed");
  refuses(t, { RPC_PORT: "x" }, /^RPC_PORT\b/, "RPC_PORT=x");
  refuses(t, { OPS_PORT: "99999" }, /^OPS_PORT\b/, "OPS_PORT=99999");
  refuses(t, { WEBHOOK_MAX_ATTEMPTS: "0" }, /^WEBHOOK_MAX_ATTEMPTS\b/, "WEBHOOK_MAX_ATTEMPTS=0");
  refuses(t, { BODY_LIMIT_BYTES: "10" }, /^BODY_LIMIT_BYTES\b/, "BODY_LIMIT_BYTES=10");
});

t.test("HTTP_KEEP_ALIVE_SECONDS", async (t) => {
  t.equal(loadConfig({}).httpKeepAliveSeconds, 75, "default: 75 s, longer than the idle time of common proxies in front (60 s)");
  t.equal(loadConfig({ HTTP_KEEP_ALIVE_SECONDS: "620" }).httpKeepAliveSeconds, 620);
  refuses(t, { HTTP_KEEP_ALIVE_SECONDS: "0" }, /^HTTP_KEEP_ALIVE_SECONDS\b/, "HTTP_KEEP_ALIVE_SECONDS=0");
  refuses(t, { HTTP_KEEP_ALIVE_SECONDS: "3601" }, /^HTTP_KEEP_ALIVE_SECONDS\b/, "HTTP_KEEP_ALIVE_SECONDS=3601");
  refuses(t, { HTTP_KEEP_ALIVE_SECONDS: "5s" }, /^HTTP_KEEP_ALIVE_SECONDS\b/, "HTTP_KEEP_ALIVE_SECONDS=5s");
});

t.test("WEBHOOK_AUTO_DISABLE_AFTER_SECONDS", async (t) => {
  t.equal(loadConfig({}).webhookAutoDisableAfterSeconds, 5 * 86_400, "default: 5 days");
  t.equal(loadConfig({ WEBHOOK_AUTO_DISABLE_AFTER_SECONDS: "3" }).webhookAutoDisableAfterSeconds, 3);
  t.equal(loadConfig({ WEBHOOK_AUTO_DISABLE_AFTER_SECONDS: "0" }).webhookAutoDisableAfterSeconds, 0, "0: never");
  t.equal(loadConfig({ WEBHOOK_AUTO_DISABLE_AFTER_SECONDS: "" }).webhookAutoDisableAfterSeconds, 5 * 86_400, "empty: default");
  refuses(t, { WEBHOOK_AUTO_DISABLE_AFTER_SECONDS: "5d" }, /^WEBHOOK_AUTO_DISABLE_AFTER_SECONDS\b.*whole number/, "units");
  refuses(t, { WEBHOOK_AUTO_DISABLE_AFTER_SECONDS: "-1" }, /^WEBHOOK_AUTO_DISABLE_AFTER_SECONDS\b/, "negative");
  refuses(t, { WEBHOOK_AUTO_DISABLE_AFTER_SECONDS: "31536001" }, /^WEBHOOK_AUTO_DISABLE_AFTER_SECONDS\b.*between 0 and 31536000/, "past a year");
});

t.test("WEBHOOK_RETRY_DELAYS", async (t) => {
  refuses(t, { WEBHOOK_RETRY_DELAYS: "60,-1" }, /^WEBHOOK_RETRY_DELAYS\b/, "negative delay");
  refuses(t, { WEBHOOK_RETRY_DELAYS: "60,0" }, /^WEBHOOK_RETRY_DELAYS\b/, "zero delay");
  refuses(t, { WEBHOOK_RETRY_DELAYS: "60,,300" }, /^WEBHOOK_RETRY_DELAYS\b/, "empty entry");
  refuses(t, { WEBHOOK_RETRY_DELAYS: "60;300" }, /^WEBHOOK_RETRY_DELAYS\b/, "wrong separator");
  refuses(t, { WEBHOOK_RETRY_DELAYS: "1m,5m" }, /^WEBHOOK_RETRY_DELAYS\b/, "units");
  refuses(t, { WEBHOOK_RETRY_DELAYS: "1e2" }, /^WEBHOOK_RETRY_DELAYS\b/, "exponent");
  refuses(t, { WEBHOOK_RETRY_DELAYS: "60," }, /^WEBHOOK_RETRY_DELAYS\b/, "trailing comma");
  t.same(loadConfig({ WEBHOOK_RETRY_DELAYS: "0.2,0.4" }).webhookRetryDelaysSeconds, [0.2, 0.4], "decimals accepted");
  t.same(parseRetryDelays("5"), [5], "a single delay");
});

t.test("SECRET_ENCRYPTION_KEY", async (t) => {
  const bytes = Buffer.alloc(32, 7);
  t.same(loadConfig({ SECRET_ENCRYPTION_KEY: bytes.toString("base64") }).secretEncryptionKey, bytes, "base64");
  t.same(loadConfig({ SECRET_ENCRYPTION_KEY: bytes.toString("hex").toUpperCase() }).secretEncryptionKey, bytes, "upper-case hex");
  refuses(t, { SECRET_ENCRYPTION_KEY: "ab".repeat(31) }, /^SECRET_ENCRYPTION_KEY\b.*32 bytes/, "31 bytes of hex");
  refuses(t, { SECRET_ENCRYPTION_KEY: "ab".repeat(33) }, /^SECRET_ENCRYPTION_KEY\b/, "33 bytes of hex");
  refuses(t, { SECRET_ENCRYPTION_KEY: Buffer.alloc(16).toString("base64") }, /^SECRET_ENCRYPTION_KEY\b/, "16 bytes of base64");
  refuses(t, { SECRET_ENCRYPTION_KEY: "short" }, /^SECRET_ENCRYPTION_KEY\b/, "a password");
});

t.test("JETSTREAM_PREFIX", async (t) => {
  refuses(t, { JETSTREAM_PREFIX: "pay.ments" }, /^JETSTREAM_PREFIX\b/, "a dot");
  refuses(t, { JETSTREAM_PREFIX: "pay*" }, /^JETSTREAM_PREFIX\b/, "a wildcard");
  refuses(t, { JETSTREAM_PREFIX: "pay ments" }, /^JETSTREAM_PREFIX\b/, "a space");
  refuses(t, { JETSTREAM_PREFIX: "a".repeat(33) }, /^JETSTREAM_PREFIX\b/, "33 characters");
  t.equal(loadConfig({ JETSTREAM_PREFIX: "a".repeat(32) }).jetstreamPrefix, "a".repeat(32), "32 characters");
});

t.test("URLs", async (t) => {
  refuses(t, { PUBLIC_BASE_URL: "ftp://x" }, /^PUBLIC_BASE_URL\b.*http/, "ftp scheme");
  refuses(t, { PUBLIC_BASE_URL: "pay.example.com" }, /^PUBLIC_BASE_URL\b.*absolute URL/, "no scheme");
  refuses(t, { PUBLIC_BASE_URL: "javascript:alert(1)" }, /^PUBLIC_BASE_URL\b/, "javascript scheme");
  refuses(t, { CHECKOUT_BASE_URL: "/checkout" }, /^CHECKOUT_BASE_URL\b/, "relative checkout URL");
  refuses(t, { RPC_URL: "grpc://h:1" }, /^RPC_URL\b/, "non-http RPC URL");
  t.equal(
    loadConfig({ CHECKOUT_BASE_URL: "https://checkout.example.com/pay/" }).checkoutBaseUrl,
    "https://checkout.example.com/pay",
    "explicit checkout URL, trailing slash removed",
  );
  t.equal(loadConfig({ PORT: "9000" }).publicBaseUrl, "http://localhost:9000", "default public URL follows PORT");
});

t.test("NATS_URL: one server or a cluster's, each entry checked", async (t) => {
  t.equal(loadConfig({ NATS_URL: "nats://127.0.0.1:4222" }).natsUrl, "nats://127.0.0.1:4222", "one server");
  t.equal(loadConfig({ NATS_URL: "   " }).natsUrl, undefined, "blank: the default (127.0.0.1:4222 or embedded)");
  const list = loadConfig({ NATS_URL: " nats://127.0.0.1:4222 , tls://nats-2.internal:4223,127.0.0.1:4224,[::1]:4225" }).natsUrl;
  t.equal(list, "nats://127.0.0.1:4222,tls://nats-2.internal:4223,127.0.0.1:4224,[::1]:4225", "several, trimmed; nats://, tls:// or host:port");
  t.same(natsServers(list!), ["nats://127.0.0.1:4222", "tls://nats-2.internal:4223", "127.0.0.1:4224", "[::1]:4225"], "the client gets one entry per server");
  t.same(natsServers("nats://127.0.0.1:4222"), ["nats://127.0.0.1:4222"], "a single server is a list of one");
  t.equal(loadConfig({ NATS_URL: "nats://app:pw@127.0.0.1:4222" }).natsUrl, "nats://app:pw@127.0.0.1:4222", "credentials in an entry are kept for the client");

  refuses(t, { NATS_URL: "nats://127.0.0.1:4222,http://127.0.0.1:8222" }, /^NATS_URL entry "http:\/\/127\.0\.0\.1:8222" \(entry 2 of 2\) has the scheme http/, "a monitoring URL in the list");
  refuses(t, { NATS_URL: "ws://127.0.0.1:8080" }, /^NATS_URL entry "ws:\/\/127\.0\.0\.1:8080" has the scheme ws/, "websocket (not for this client)");
  refuses(t, { NATS_URL: "nats://127.0.0.1:4222,,nats://127.0.0.1:4223" }, /^NATS_URL has an empty entry \(entry 2 of 3\)/, "two commas");
  refuses(t, { NATS_URL: "nats://127.0.0.1:4222," }, /^NATS_URL has an empty entry \(entry 2 of 2\)/, "a trailing comma");
  refuses(t, { NATS_URL: "nats://127.0.0.1:4222;nats://127.0.0.1:4223" }, /^NATS_URL entry "nats:\/\/127\.0\.0\.1:4222;nats:\/\/127\.0\.0\.1:4223" is not a server address/, "a semicolon");
  refuses(t, { NATS_URL: "a:4222,nats://b:99999" }, /^NATS_URL entry "nats:\/\/b:99999" \(entry 2 of 2\) is not a server address/, "a port out of range");
  refuses(t, { NATS_URL: "nats://b:0" }, /^NATS_URL entry "nats:\/\/b:0" has port 0/, "port 0");
  refuses(t, { NATS_URL: "nats://b:4222/path" }, /^NATS_URL entry "nats:\/\/b:4222\/path" is not a server address/, "a path");
  refuses(t, { NATS_URL: "nats://:4222" }, /^NATS_URL entry "nats:\/\/:4222" is not a server address/, "no host");
  refuses(t, { NATS_URL: "h:port" }, /^NATS_URL entry "h:port" is not a server address/, "a port that is no number");

  // A password in a bad entry is not repeated in the message (main prints it as the process's one line).
  try {
    loadConfig({ NATS_URL: "nats://127.0.0.1:4222,nats://app:s3cret-pass@bad host:4222" });
    t.fail("a bad entry with credentials: expected a ConfigError");
  } catch (err) {
    t.ok(err instanceof ConfigError, "a bad entry with credentials is a ConfigError");
    t.match((err as Error).message, /^NATS_URL entry "nats:\/\/\*\*\*@bad host:4222" \(entry 2 of 2\)/, "it names the entry, credentials masked");
    t.notMatch((err as Error).message, /s3cret|app:/, "without the user or password");
  }
});

t.test("JETSTREAM_REPLICAS", async (t) => {
  t.equal(loadConfig({ JETSTREAM_REPLICAS: "3" }).jetstreamReplicas, 3);
  t.equal(loadConfig({ JETSTREAM_REPLICAS: " 5 " }).jetstreamReplicas, 5, "5, the most JetStream allows");
  t.equal(loadConfig({ JETSTREAM_REPLICAS: "" }).jetstreamReplicas, 1, "empty: 1");
  refuses(t, { JETSTREAM_REPLICAS: "0" }, /^JETSTREAM_REPLICAS must be between 1 and 5, got 0/, "0");
  refuses(t, { JETSTREAM_REPLICAS: "6" }, /^JETSTREAM_REPLICAS must be between 1 and 5, got 6/, "6");
  refuses(t, { JETSTREAM_REPLICAS: "three" }, /^JETSTREAM_REPLICAS must be a whole number/, "a word");
  refuses(t, { JETSTREAM_REPLICAS: "2.5" }, /^JETSTREAM_REPLICAS must be a whole number/, "a fraction");
});

t.test("GRPC_REFLECTION", async (t) => {
  t.equal(loadConfig({}).grpcReflection, "auto", "default: auto (served while no Live API key is active)");
  t.equal(loadConfig({ GRPC_REFLECTION: "" }).grpcReflection, "auto", "empty: default");
  t.equal(loadConfig({ GRPC_REFLECTION: "on" }).grpcReflection, "on");
  t.equal(loadConfig({ GRPC_REFLECTION: " off " }).grpcReflection, "off", "trimmed");
  t.equal(loadConfig({ GRPC_REFLECTION: "auto" }).grpcReflection, "auto");
  refuses(t, { GRPC_REFLECTION: "true" }, /^GRPC_REFLECTION must be on, off or auto, got "true"$/, "a boolean word");
  refuses(t, { GRPC_REFLECTION: "ON" }, /^GRPC_REFLECTION\b/, "upper case");
});

t.test("WATCHER_MEMPOOL_MS", async (t) => {
  t.equal(loadConfig({}).watcherMempoolMs, 2000, "default: every poll (WATCHER_POLL_MS's default)");
  t.equal(loadConfig({ WATCHER_POLL_MS: "500" }).watcherMempoolMs, 500, "unset: WATCHER_POLL_MS");
  t.equal(loadConfig({ WATCHER_POLL_MS: "500", WATCHER_MEMPOOL_MS: "30000" }).watcherMempoolMs, 30_000, "its own: e.g. a mainnet node, whose getrawmempool answers megabytes");
  t.equal(loadConfig({ WATCHER_MEMPOOL_MS: "" }).watcherMempoolMs, 2000, "empty: default");
  refuses(t, { WATCHER_MEMPOOL_MS: "10" }, /WATCHER_MEMPOOL_MS must be between 50 and 3600000, got 10/, "too often");
  refuses(t, { WATCHER_MEMPOOL_MS: "often" }, /WATCHER_MEMPOOL_MS must be a whole number/, "not a number");
});

t.test("MEMPOOL_ABSENT_READS and MEMPOOL_ABSENT_SECONDS", async (t) => {
  t.same(loadConfig({}).mempoolAbsence, { reads: 3, seconds: 60 }, "default: missing from 3 reports over at least 60 s");
  t.same(loadConfig({ MEMPOOL_ABSENT_READS: "5", MEMPOOL_ABSENT_SECONDS: "600" }).mempoolAbsence, { reads: 5, seconds: 600 });
  t.same(loadConfig({ MEMPOOL_ABSENT_READS: "1", MEMPOOL_ABSENT_SECONDS: "0" }).mempoolAbsence, { reads: 1, seconds: 0 }, "the lowest: the first report that misses it (a test's setting)");
  refuses(t, { MEMPOOL_ABSENT_READS: "0" }, /MEMPOOL_ABSENT_READS must be between 1 and 1000, got 0/, "no reads");
  refuses(t, { MEMPOOL_ABSENT_SECONDS: "86401" }, /MEMPOOL_ABSENT_SECONDS must be between 0 and 86400, got 86401/, "over a day");
  refuses(t, { MEMPOOL_ABSENT_SECONDS: "1m" }, /MEMPOOL_ABSENT_SECONDS must be a whole number/, "not a number");
});

t.test("a Live node over plain http must be on this machine: anyone on the path could answer for it", async (t) => {
  refuses(t, { BITCOIN_LIVE_RPC_URL: "http://watcher:secret@10.0.0.5:8332" }, /^BITCOIN_LIVE_RPC_URL must be https to a host other than this machine \(10\.0\.0\.5 over http\)[^\n]*ALLOW_INSECURE_LIVE_RPC=1$/, "bitcoind over http");
  refuses(t, { ETHEREUM_LIVE_RPC_URL: "ws://eth.example:8546" }, /^ETHEREUM_LIVE_RPC_URL must be an absolute http\(s\) URL .*got the scheme ws/, "an Ethereum node over ws: http(s) only");
  refuses(t, { TRON_LIVE_RPC_URL: "http://[2001:db8::1]:8545/jsonrpc" }, /^TRON_LIVE_RPC_URL must be https .*2001:db8::1/, "an IPv6 host");
  t.notMatch((() => { try { loadConfig({ BITCOIN_LIVE_RPC_URL: "http://watcher:secret@10.0.0.5:8332" }); } catch (err) { return (err as Error).message; } return ""; })(), "secret", "the refusal never shows the password");
  for (const url of ["http://127.0.0.1:8545", "http://localhost:8545", "http://[::1]:8546", "http://127.1.2.3:8545"]) {
    t.equal(loadConfig({ ETHEREUM_LIVE_RPC_URL: url }).chainEndpoints[0]?.url, url, `loopback is allowed: ${url}`);
  }
  t.equal(loadConfig({ ETHEREUM_LIVE_RPC_URL: "https://eth.example/v2/KEY" }).chainEndpoints.length, 1, "https to any host");
  t.equal(loadConfig({ ETHEREUM_TEST_RPC_URL: "http://10.0.0.5:8545" }).chainEndpoints.length, 1, "Test nodes may be anywhere over http");
  t.equal(loadConfig({ BITCOIN_LIVE_RPC_URL: "http://u:p@10.0.0.5:8332", ALLOW_INSECURE_LIVE_RPC: "1" }).chainEndpoints.length, 1, "ALLOW_INSECURE_LIVE_RPC=1: a private network");
  refuses(t, { BITCOIN_LIVE_RPC_URL: "http://u:p@10.0.0.5:8332", ALLOW_INSECURE_LIVE_RPC: "0" }, /^BITCOIN_LIVE_RPC_URL must be https/, "0 allows nothing");
  refuses(t, { ALLOW_INSECURE_LIVE_RPC: "yes" }, /^ALLOW_INSECURE_LIVE_RPC must be 1 or 0/, "another value");
});

t.test("WATCHER_MAX_RESPONSE_BYTES: the most one node answer may hold", async (t) => {
  t.equal(loadConfig({ ETHEREUM_TEST_RPC_URL: "http://127.0.0.1:8545" }).chainEndpoints[0]?.maxResponseBytes, 64 * 1024 * 1024, "64 MiB by default: mainnet's biggest bitcoin block at getblock verbosity 2, with room");
  t.equal(loadConfig({ ETHEREUM_TEST_RPC_URL: "http://127.0.0.1:8545", WATCHER_MAX_RESPONSE_BYTES: "1048576" }).chainEndpoints[0]?.maxResponseBytes, 1_048_576);
  refuses(t, { WATCHER_MAX_RESPONSE_BYTES: "100" }, /^WATCHER_MAX_RESPONSE_BYTES must be between 65536 and 1073741824/, "too small");
});

t.test("OPERATOR_WATCHED_NETWORKS: networks of the asset table, else a startup error naming the setting", async (t) => {
  t.same(loadConfig({}).operatorWatchedNetworks, [], "none by default");
  t.same(loadConfig({ OPERATOR_WATCHED_NETWORKS: " Solana, ethereum,,solana " }).operatorWatchedNetworks, ["solana", "ethereum"], "trimmed, lowercased, each once");
  refuses(t, { OPERATOR_WATCHED_NETWORKS: "solana,dogecoin" }, /^OPERATOR_WATCHED_NETWORKS takes networks \(bitcoin, .*solana.*\) separated by commas, got "dogecoin"$/, "an unknown network");
  refuses(t, { OPERATOR_WATCHED_NETWORKS: "ethereum:live" }, /OPERATOR_WATCHED_NETWORKS .* got "ethereum:live"/, "a network, not a chain");
});

t.test("retention: durations with a unit, at least a minute, documented defaults", async (t) => {
  t.same(loadConfig({}).retention, { idempotencySeconds: 86_400, eventSeconds: 90 * 86_400, rejectedOutputSeconds: 30 * 86_400, cashierSessionSeconds: 30 * 86_400, dashboardSessionSeconds: 30 * 86_400, intervalSeconds: 3600 }, "24h, 90d, 30d, 30d, 30d; every hour");
  const set = loadConfig({ IDEMPOTENCY_RETENTION: "60s", EVENT_RETENTION: " 2m ", REJECTED_OUTPUT_RETENTION: "48h", CASHIER_SESSION_RETENTION: "7d", DASHBOARD_SESSION_RETENTION: "12h", RETENTION_INTERVAL: "5s" }).retention;
  t.same(set, { idempotencySeconds: 60, eventSeconds: 120, rejectedOutputSeconds: 172_800, cashierSessionSeconds: 604_800, dashboardSessionSeconds: 43_200, intervalSeconds: 5 });
  refuses(t, { IDEMPOTENCY_RETENTION: "59s" }, /^IDEMPOTENCY_RETENTION must be between 60s and 3650d, got "59s"$/, "under a minute");
  refuses(t, { EVENT_RETENTION: "90" }, /^EVENT_RETENTION must be a duration such as 60s, 15m, 24h or 90d, got "90"$/, "no unit");
  refuses(t, { EVENT_RETENTION: "1w" }, /^EVENT_RETENTION must be a duration/, "an unknown unit");
  refuses(t, { EVENT_RETENTION: "-5d" }, /^EVENT_RETENTION must be a duration/, "negative");
  refuses(t, { CASHIER_SESSION_RETENTION: "99999d" }, /^CASHIER_SESSION_RETENTION must be between/, "beyond ten years");
  refuses(t, { RETENTION_INTERVAL: "2d" }, /^RETENTION_INTERVAL must be between 1s and 1d/, "the job runs at least daily");
});
