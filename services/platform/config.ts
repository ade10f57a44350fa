import path from "node:path";
import { explorersFrom, type Explorers } from "../vocabulary/explorers.ts";
import { defaultMaxReorgDepth, followedNetworks, networks } from "../vocabulary/assets.ts";
import { parseConnectTo, type ConnectTo } from "./connect-to.ts";
import { checkTrustedProxy } from "./client-address.ts";

/** Runtime configuration, read once from the environment. See docs/operations.md, "Configuration". */
export interface Config {
  /** Unset: the embedded PostgreSQL under DATA_DIR. */
  databaseUrl: string | undefined;
  /**
   * Unset: 127.0.0.1:4222 when it answers, else an embedded nats-server under DATA_DIR. Else one
   * server or several (a cluster's), comma-separated, each checked; nats.ts splits the list.
   */
  natsUrl: string | undefined;
  /** JETSTREAM_REPLICAS: replicas of every stream the service creates (its consumers follow their stream). */
  jetstreamReplicas: number;
  port: number;
  rpcPort: number;
  /** Where a gateway-only process reaches the rpc role. */
  rpcUrl: string;
  opsPort: number;
  /** HOST: where the REST gateway (the merchant API and the checkout pages) listens. */
  host: string;
  /**
   * RPC_HOST and OPS_HOST: where the rpc port (internal services, reflection) and the ops port
   * (/metrics, health) listen. Loopback unless set, whatever HOST says: opening the merchant API
   * to a network must not open these with it.
   */
  rpcHost: string;
  opsHost: string;
  publicBaseUrl: string;
  checkoutBaseUrl: string;
  /** DASHBOARD_BASE_URL: where the merchant dashboard is served (its path; never under /api/). */
  dashboardBaseUrl: string;
  /** EXPLORER_TX_URLS over the built-in explorers: where the dashboard links a transaction. */
  explorers: Explorers;
  /** DASHBOARD_SESSION_IDLE_MINUTES and DASHBOARD_SESSION_MAX_HOURS, in seconds: a dashboard session ends unused for idleSeconds, or maxSeconds after sign-in. */
  dashboardSessions: { idleSeconds: number; maxSeconds: number };
  /** DASHBOARD_SIGN_IN_RATE_LIMIT_PER_MINUTE: dashboard sign-in attempts a minute per client address, and per key tried. */
  dashboardSignInRateLimitPerMinute: number;
  /** Unset: the installation's own, "payments-<installation id>". */
  jetstreamPrefix: string | undefined;
  webhookRetryDelaysSeconds: number[];
  webhookMaxAttempts: number;
  webhookTimeoutMs: number;
  /** WEBHOOK_CONNECT_TO, parsed: tests map a webhook host:443 to a loopback port. */
  webhookConnectTo: ConnectTo[];
  /** Attempts one worker process runs at once. */
  webhookConcurrency: number;
  /** WEBHOOK_ENDPOINT_CONCURRENCY: attempts an endpoint that is new, slow or hanging may have in flight in one worker process (fairness.ts). */
  webhookEndpointConcurrency: number;
  /** WEBHOOK_ENDPOINT_FAST_MS: an endpoint whose attempts succeed within this on average may use all of a worker's slots; an attempt running longer makes it slow. */
  webhookEndpointFastMs: number;
  /** WEBHOOK_CIRCUIT_TIMEOUTS: timeouts in a row that open an endpoint's circuit in a worker (one attempt at a time until one is answered; 0: never). */
  webhookCircuitTimeouts: number;
  /**
   * WEBHOOK_MAX_ACK_PENDING: the delivery consumer's max_ack_pending, the messages handed out and
   * not yet acknowledged (attempts running, retries waiting in JetStream) before it hands out no more.
   */
  webhookMaxAckPending: number;
  /**
   * WEBHOOK_STREAM_WAIT_SECONDS: the longest a retry waits in JetStream; one due later waits in the
   * outbox and is published when due (delivery/webhook-deliveries.ts takeUnpublished), so a backlog of retries cannot fill the
   * consumer's max_ack_pending.
   */
  webhookStreamWaitSeconds: number;
  /** WEBHOOK_ENDPOINT_STREAM_RETRIES: retries and held-back messages of one endpoint a worker process leaves waiting in JetStream; more wait in the outbox. */
  webhookEndpointStreamRetries: number;
  /** WEBHOOK_MAIN_LANE_PER_SECOND: a merchant's messages a second on the main lane (bursts of 5 s' worth); more take the backlog lane (delivery/lanes.ts). */
  webhookMainLanePerSecond: number;

  /**
   * WEBHOOK_AUTO_DISABLE_AFTER_SECONDS: an enabled endpoint is disabled by the scheduler when a
   * failure ends a delivery after it has had no successful attempt since a failed one at least
   * this long before; 0 never disables.
   */
  webhookAutoDisableAfterSeconds: number;
  /**
   * WEBHOOK_RECOVERY_MAX_DAYS and WEBHOOK_RECOVERY_MAX_EVENTS: the furthest back and the most events
   * a recovery of missed events (endpoint enable --recover-since) takes without --force;
   * WEBHOOK_RECOVERY_PAGE_SIZE: the deliveries it creates at once (webhooks/recovery.ts).
   */
  webhookRecovery: { maxDays: number; maxEvents: number; pageSize: number };
  /** 32 bytes; unset: generated once under DATA_DIR. */
  secretEncryptionKey: Buffer | undefined;
  /** During an encryption-key rotation: the key being replaced, until "admin secrets reseal" has run. */
  secretEncryptionKeyPrevious: Buffer | undefined;
  dataDir: string;
  logLevel: string;
  bodyLimitBytes: number;
  /** How long the REST port keeps an idle keep-alive connection open (gateway/server.ts keepAliveTimeoutMs); not the rpc or ops port. */
  httpKeepAliveSeconds: number;
  dbPoolSize: number;
  /** Calls per minute per client address on rate-limited public routes (the QR configuration). */
  publicRateLimitPerMinute: number;
  /** Calls per minute per credential on rate-limited credentialed routes (the Site Gateway). */
  credentialRateLimitPerMinute: number;
  /**
   * API_READ_RATE_LIMIT / API_WRITE_RATE_LIMIT: reads (GET routes) and writes (the rest) an API key
   * may make per API_RATE_LIMIT_SECONDS, each a token bucket of that size refilled evenly.
   */
  apiRateLimit: { reads: number; writes: number; seconds: number };
  /** SITE_READ_RATE_LIMIT_PER_MINUTE: Site Gateway reads a minute per site credential and client address. */
  siteReadRateLimitPerMinute: number;
  /** CHECKOUT_RATE_LIMIT_PER_MINUTE: checkout page loads and status reads (GetCheckout) a minute per client address. */
  checkoutRateLimitPerMinute: number;
  /** TERMINAL_RATE_LIMIT_PER_MINUTE / TERMINAL_ADDRESS_RATE_LIMIT_PER_MINUTE: terminal creates a minute per cashier session, and per client address. */
  terminalRateLimit: { perSession: number; perAddress: number };
  /** RATE_LIMIT_PROCESSES: the rpc processes sharing the traffic; while the shared buckets cannot be reached each process keeps 1/n of every budget. */
  rateLimitProcesses: number;
  /** RATE_LIMIT_STORE: postgres (every process takes from the same buckets) or local (each process alone, divided by RATE_LIMIT_PROCESSES). */
  rateLimitStore: "postgres" | "local";
  /** TRUSTED_PROXIES: peers whose X-Forwarded-For names the client (addresses and CIDR ranges); none by default. */
  trustedProxies: string[];
  /** Go-live readiness flags active API keys older than this many days (API_KEY_MAX_AGE_DAYS). */
  apiKeyMaxAgeDays: number;
  /** GRPC_REFLECTION: on, off, or (unset) auto: served while the installation has no active Live API key. */
  grpcReflection: "on" | "off" | "auto";
  /** <NETWORK>_<ENVIRONMENT>_RPC_URL: the nodes the watcher role follows, over http(s) (Bitcoin Core's RPC; Ethereum's or TRON's JSON-RPC, several comma-separated: the first read, the others asked to agree). */
  chainEndpoints: ChainEndpoint[];
  /**
   * OPERATOR_WATCHED_NETWORKS: networks a watcher of the operator's own follows (reporting through
   * ObservationService or ChainService), in both environments. With the built-in watchers
   * (<NETWORK>_<ENVIRONMENT>_RPC_URL) and the chains a watcher reports, they decide where a Live
   * create is taken (services/chains/coverage.ts).
   */
  operatorWatchedNetworks: string[];
  /** WATCHER_POLL_MS: how often a watcher asks its node for a new head. */
  watcherPollMs: number;
  /** WATCHER_MEMPOOL_MS: how often the bitcoin watcher reads its node's mempool once caught up (default: every poll). */
  watcherMempoolMs: number;
  /** WATCHER_LEASE_SECONDS: how long a dead watcher's chain stays unfollowed before another takes over. */
  watcherLeaseSeconds: number;
  /** WATCHER_NODE_PROOF_SECONDS: how often a followed node proves again which chain it serves (it also does after every failure). */
  watcherNodeProofSeconds: number;
  /** <NETWORK>_CONFIRMATIONS: confirmations an output needs to count on that network, instead of the asset table's. */
  confirmationOverrides: Record<string, number>;
  /** <NETWORK>_MAX_REORG_DEPTH: how many best blocks a fork may take away and still be followed; a deeper one stops that chain until an operator resumes it. */
  maxReorgDepth: Record<(typeof followedNetworks)[number], number>;
  /** LATE_PAYMENT_WINDOW_SECONDS: how long after expiry an intent's address is still watched, so a late payment is seen. */
  latePaymentWindowSeconds: number;
  /** EXCEPTION_WATCH_SECONDS: how long after that window, or after a cancellation, an intent's address is still watched, so that a payment which can no longer count is told (payment.exception). */
  exceptionWatchSeconds: number;
  /**
   * MEMPOOL_ABSENT_READS / MEMPOOL_ABSENT_SECONDS: a bitcoin payment seen in the mempool that is
   * missing from later reads (and no conflicting spend was seen) is withdrawn only once it was
   * missing from this many consecutive reports of a loaded mempool, over at least this long.
   */
  mempoolAbsence: { reads: number; seconds: number };
  /** WATCHER_CREDENTIAL_TEST / _LIVE: the internal credential a watcher in its own process sends, per environment. */
  watcherCredentials: { test?: string; live?: string };
  /** RATE_*: where fiat-priced intents' quotes come from, and when a quote is refused (services/rates). */
  rates: RateSettings;
  /** QUOTE_SECONDS, QUOTE_GRACE_SECONDS: how long a fiat-priced intent's quote holds, and how long after it was replaced a payment may still count at it (services/intents/quotes.ts). */
  quotes: QuoteSettings;
  /** *_RETENTION and RETENTION_INTERVAL: how long what is only kept for a while is kept (services/retention). */
  retention: RetentionSettings;
}

/**
 * How long each kind of record that is only kept for a while is kept, in seconds (docs/operations.md,
 * "Retention"). Payment Intents and their transactions are the merchant's records and have none.
 */
export interface RetentionSettings {
  /** IDEMPOTENCY_RETENTION (24h, as Stripe keeps keys): past it a key reused is a new request. */
  idempotencySeconds: number;
  /** EVENT_RETENTION (90d): an event past it, with its deliveries and attempts, is gone (404), unless a delivery of it is still pending or processing. */
  eventSeconds: number;
  /** REJECTED_OUTPUT_RETENTION (30d): outputs the core refused, counted from their last report. */
  rejectedOutputSeconds: number;
  /** CASHIER_SESSION_RETENTION (30d): a cashier session is kept this long after it expired or was revoked. */
  cashierSessionSeconds: number;
  /** DASHBOARD_SESSION_RETENTION (30d): a dashboard session, or a sign-in link, is kept this long after it ended (expired, idle, revoked or used). */
  dashboardSessionSeconds: number;
  /** RETENTION_INTERVAL (1h): how often the scheduler applies retention. */
  intervalSeconds: number;
}

const durationUnits: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400 };

/** A duration such as `60s`, `15m`, `24h` or `90d`, in seconds; a bare number is refused, since its unit would be a guess. */
export function parseDuration(name: string, raw: string, minSeconds: number, maxSeconds: number): number {
  const m = /^(\d+)\s*([smhd])$/.exec(raw.trim());
  if (!m) throw new ConfigError(`${name} must be a duration such as 60s, 15m, 24h or 90d, got "${raw}"`);
  const seconds = Number(m[1]) * durationUnits[m[2]!]!;
  if (seconds < minSeconds || seconds > maxSeconds) throw new ConfigError(`${name} must be between ${minSeconds}s and ${maxSeconds / 86_400}d, got "${raw}"`);
  return seconds;
}

/** At least a minute: less would remove a record while the request or the delivery that wrote it may still be running. */
const minRetentionSeconds = 60;
const maxRetentionSeconds = 10 * 365 * 86_400;

function retentionSettings(env: Env): RetentionSettings {
  const d = (name: string, fallback: string) => parseDuration(name, optional(env, name) ?? fallback, minRetentionSeconds, maxRetentionSeconds);
  return {
    idempotencySeconds: d("IDEMPOTENCY_RETENTION", "24h"),
    eventSeconds: d("EVENT_RETENTION", "90d"),
    rejectedOutputSeconds: d("REJECTED_OUTPUT_RETENTION", "30d"),
    cashierSessionSeconds: d("CASHIER_SESSION_RETENTION", "30d"),
    dashboardSessionSeconds: d("DASHBOARD_SESSION_RETENTION", "30d"),
    intervalSeconds: parseDuration("RETENTION_INTERVAL", optional(env, "RETENTION_INTERVAL") ?? "1h", 1, 86_400),
  };
}

/** The rate engine's settings (docs/operations.md, "Exchange rates"). */
export interface RateSettings {
  /** RATE_SOURCES: kraken, coinbase, bitstamp (the default, all three) and fixed (development, Test only). */
  sources: ("kraken" | "coinbase" | "bitstamp" | "fixed")[];
  /** RATE_SOURCE_<NAME>_URL: an exchange's API base URL instead of its public one; https unless on this machine. */
  urls: { kraken?: string; coinbase?: string; bitstamp?: string };
  /** RATE_REFRESH_SECONDS: how often every pair is read again from every source, in the background. */
  refreshSeconds: number;
  /** RATE_MAX_AGE_SECONDS: an answer older than this is stale and not used. */
  maxAgeSeconds: number;
  /** RATE_MAX_SPREAD_BPS: an answer further than this from the median of the fresh ones is an outlier and dropped. */
  maxSpreadBps: number;
  /**
   * RATE_MIN_SOURCES: agreeing fresh answers a quote needs (default 2 when 2 or more sources are
   * configured, else 1). A Live quote needs at least 2 whatever it says, and below 2 it stops the
   * start of an installation with Live keys (rates/engine.ts, liveMinSources).
   */
  minSources: number;
  /** RATE_STABLECOIN_PEG: 1 (default) prices USDC and USDT 1:1 in USD; 0 quotes them like any asset. */
  stablecoinPeg: boolean;
}

const rateSourceNames = ["kraken", "coinbase", "bitstamp", "fixed"] as const;

/**
 * RATE_SOURCE_<NAME>_URL: an exchange's API base URL. Every exchange's answers price Live intents
 * (only the development source, fixed, is Test only), so it is https unless on this machine (a
 * local fake in tests), as a Live node's URL is; whoever is on the path to an exchange over plain
 * http could answer for it. The value is never repeated in a refusal: a proxy's URL may hold a token.
 */
function rateSourceUrl(name: string, raw: string): string {
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    throw new ConfigError(`${name} must be an absolute http(s) URL of the exchange's API`);
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
    throw new ConfigError(`${name} must be an http(s) URL of the exchange's API, got the scheme ${parsed.protocol.slice(0, -1)}`);
  }
  if (parsed.username !== "" || parsed.password !== "") throw new ConfigError(`${name} must not carry a user or password: the exchanges' public APIs take none`);
  if (parsed.protocol === "http:" && !loopbackHost(parsed.hostname)) {
    throw new ConfigError(`${name} must be https to a host other than this machine (${parsed.hostname} over http): anyone on the path could answer for an exchange whose rates price Live intents`);
  }
  return raw.replace(/\/+$/, "");
}

function rateSettings(env: Env): RateSettings {
  const raw = optional(env, "RATE_SOURCES") ?? "kraken,coinbase,bitstamp";
  const sources = raw.split(",").map((s) => s.trim().toLowerCase()).filter((s) => s !== "");
  for (const s of sources) {
    if (!(rateSourceNames as readonly string[]).includes(s)) throw new ConfigError(`RATE_SOURCES takes ${rateSourceNames.join(", ")} separated by commas, got "${s}"`);
  }
  if (sources.length === 0) throw new ConfigError(`RATE_SOURCES must name at least one of ${rateSourceNames.join(", ")}`);
  if (new Set(sources).size !== sources.length) throw new ConfigError(`RATE_SOURCES names a source twice: a source agreeing with itself proves nothing`);
  const urls: RateSettings["urls"] = {};
  for (const name of ["kraken", "coinbase", "bitstamp"] as const) {
    const key = `RATE_SOURCE_${name.toUpperCase()}_URL`;
    const given = optional(env, key);
    if (given !== undefined) urls[name] = rateSourceUrl(key, given);
  }
  const peg = optional(env, "RATE_STABLECOIN_PEG") ?? "1";
  if (peg !== "0" && peg !== "1") throw new ConfigError(`RATE_STABLECOIN_PEG must be 1 or 0, got "${peg}"`);
  return {
    sources: sources as RateSettings["sources"],
    urls,
    refreshSeconds: integer(env, "RATE_REFRESH_SECONDS", 60, 1, 3600),
    maxAgeSeconds: integer(env, "RATE_MAX_AGE_SECONDS", 300, 1, 86_400),
    maxSpreadBps: integer(env, "RATE_MAX_SPREAD_BPS", 100, 1, 5000),
    minSources: integer(env, "RATE_MIN_SOURCES", sources.length >= 2 ? 2 : 1, 1, sources.length),
    stablecoinPeg: peg === "1",
  };
}

/** How long a fiat-priced intent's quote lives (docs/operations.md, "Exchange rates"). */
export interface QuoteSettings {
  /** QUOTE_SECONDS (900): how long a quote holds before what is still due is quoted again; never beyond the intent's expiry. */
  seconds: number;
  /** QUOTE_GRACE_SECONDS (120, at most QUOTE_SECONDS): how long after a quote was replaced a payment may still count at it. */
  graceSeconds: number;
}

/** The longest lifetime an intent can have (expires_in_seconds' maximum): a quote never holds longer. */
const longestIntentSeconds = 86_400;

function quoteSettings(env: Env): QuoteSettings {
  const seconds = integer(env, "QUOTE_SECONDS", 900, 1, Number.POSITIVE_INFINITY);
  if (seconds > longestIntentSeconds) {
    throw new ConfigError(
      `QUOTE_SECONDS must be at most ${longestIntentSeconds}, the longest expiry an intent can have (expires_in_seconds): a quote never outlives its intent, got ${seconds}`,
    );
  }
  const graceSeconds = integer(env, "QUOTE_GRACE_SECONDS", Math.min(120, seconds), 0, Number.POSITIVE_INFINITY);
  if (graceSeconds > seconds) {
    throw new ConfigError(`QUOTE_GRACE_SECONDS must be at most QUOTE_SECONDS (${seconds}): a lapsed quote is honoured for less than a quote's life, got ${graceSeconds}`);
  }
  return { seconds, graceSeconds };
}

/** A chain the watcher role follows: a network in an environment, through one JSON-RPC endpoint. */
export interface ChainEndpoint {
  network: (typeof followedNetworks)[number];
  environment: "test" | "live";
  /** The node read (the first URL of <NETWORK>_<ENVIRONMENT>_RPC_URL). */
  url: string;
  /**
   * The other URLs (EVM and TRON): nodes of the same chain, each asked for the hash of the last
   * block of every batch before it is reported; a batch none of them agrees with is not reported
   * (witness.ts). Empty: the one node's word is taken.
   */
  witnesses: string[];
  /** WATCHER_MAX_RESPONSE_BYTES: the most one answer of the node may hold; a longer one fails that read. Unset: defaultMaxResponseBytes. */
  maxResponseBytes?: number;
}

/**
 * The most one node answer may hold, by default: mainnet's biggest bitcoin block (4 MB of weight)
 * as `getblock <hash> 2` writes it is some 10-25 MB of JSON (each transaction's hex, twice its
 * bytes, then every input and output decoded: a block of small outputs grows most); 64 MiB leaves
 * room over that, and an EVM block with its transactions or a page of logs is far less.
 */
export const defaultMaxResponseBytes = 64 * 1024 * 1024;

/** Whether a URL's host is this machine (a name, IPv4 127/8 or IPv6 ::1): nobody on a network path sees what it says. */
export function loopbackHost(hostname: string): boolean {
  const h = hostname.replace(/^\[|\]$/g, "").toLowerCase();
  return h === "localhost" || h.endsWith(".localhost") || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h) || h === "::1" || h === "0:0:0:0:0:0:0:1";
}

function chainEndpoints(env: Env): ChainEndpoint[] {
  const out: ChainEndpoint[] = [];
  const maxResponseBytes = integer(env, "WATCHER_MAX_RESPONSE_BYTES", defaultMaxResponseBytes, 64 * 1024, 1024 * 1024 * 1024);
  const insecure = optional(env, "ALLOW_INSECURE_LIVE_RPC");
  if (insecure !== undefined && insecure !== "0" && insecure !== "1") throw new ConfigError(`ALLOW_INSECURE_LIVE_RPC must be 1 or 0, got "${insecure}"`);
  for (const network of followedNetworks) {
    for (const environment of ["test", "live"] as const) {
      const name = `${network.toUpperCase()}_${environment.toUpperCase()}_RPC_URL`;
      const raw = optional(env, name);
      if (raw === undefined) continue;
      const bitcoin = network === "bitcoin";
      const what = bitcoin
        ? "an absolute http(s) URL of a Bitcoin Core RPC endpoint (http://user:password@host:8332)"
        : network === "tron"
          ? "an absolute http(s) URL of a TRON node's Ethereum-compatible JSON-RPC endpoint (http://host:8545/jsonrpc)"
          : "an absolute http(s) URL of an Ethereum JSON-RPC endpoint";
      const urls = raw.split(",").map((u) => u.trim()).filter((u) => u !== "");
      // Bitcoin's blocks prove their own work (checked); an EVM block is only a node's word, so a second node's is asked for.
      if (bitcoin && urls.length > 1) throw new ConfigError(`${name} takes one URL: a bitcoin block's proof of work is checked instead of asking a second node`);
      if (urls.length === 0) throw new ConfigError(`${name} must be ${what}`);
      for (const url of urls) checkNodeUrl(name, url, what, environment, insecure === "1");
      if (new Set(urls).size !== urls.length) throw new ConfigError(`${name} names the same node twice: a node agreeing with itself proves nothing`);
      const [url, ...witnesses] = urls as [string, ...string[]];
      out.push({ network, environment, url, witnesses, maxResponseBytes });
    }
  }
  return out;
}

/**
 * One node URL of `name`: http(s) only, since every answer is read under WATCHER_MAX_RESPONSE_BYTES
 * and a WebSocket message is not (the watcher polls, so it would gain nothing from one); a Live
 * one https unless on this machine or `insecure`.
 */
function checkNodeUrl(name: string, raw: string, what: string, environment: "test" | "live", insecure: boolean): void {
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    throw new ConfigError(`${name} must be ${what}`);
  }
  if (!["http:", "https:"].includes(parsed.protocol)) {
    const ws = parsed.protocol === "ws:" || parsed.protocol === "wss:";
    throw new ConfigError(`${name} must be ${what}, got the scheme ${parsed.protocol.slice(0, -1)}${ws ? " (nodes are read over http(s) only, where each answer is capped by WATCHER_MAX_RESPONSE_BYTES)" : ""}`);
  }
  // Whoever is on the path to a Live node over plain http could answer for it (and read bitcoind's password).
  if (environment === "live" && parsed.protocol === "http:" && !loopbackHost(parsed.hostname) && !insecure) {
    throw new ConfigError(
      `${name} must be https to a host other than this machine (${parsed.hostname} over http): anyone on the path could answer for a Live node; on a private network set ALLOW_INSECURE_LIVE_RPC=1`,
    );
  }
}

/** OPERATOR_WATCHED_NETWORKS: network names of the asset table, comma-separated, each once. */
export function parseOperatorWatchedNetworks(raw: string | undefined): string[] {
  if (raw === undefined) return [];
  const names = raw.split(",").map((s) => s.trim().toLowerCase()).filter((s) => s !== "");
  for (const n of names) {
    if (!networks.includes(n)) throw new ConfigError(`OPERATOR_WATCHED_NETWORKS takes networks (${networks.join(", ")}) separated by commas, got "${n}"`);
  }
  return [...new Set(names)];
}

function confirmationOverrides(env: Env): Record<string, number> {
  const out: Record<string, number> = {};
  // Every network of the asset table: one the built-in watcher follows or an operator's own does, the core counts it.
  for (const network of networks) {
    const name = `${network.toUpperCase()}_CONFIRMATIONS`;
    if (optional(env, name) !== undefined) out[network] = integer(env, name, 1, 1, 10_000);
  }
  return out;
}

/** The deepest a fork may be is bounded by the blocks the core keeps (2 048): the watcher walks back twice as far, and some. */
const maxReorgDepthLimit = 1000;

function maxReorgDepth(env: Env): Record<(typeof followedNetworks)[number], number> {
  const out = { ...defaultMaxReorgDepth };
  for (const network of followedNetworks) out[network] = integer(env, `${network.toUpperCase()}_MAX_REORG_DEPTH`, defaultMaxReorgDepth[network], 1, maxReorgDepthLimit);
  return out;
}

function trustedProxies(raw: string): string[] {
  const entries = raw.split(",").map((e) => e.trim()).filter((e) => e !== "");
  for (const e of entries) {
    const reason = checkTrustedProxy(e);
    if (reason) throw new ConfigError(`TRUSTED_PROXIES: ${reason}`);
  }
  return entries;
}

/** Bad configuration: main prints the message as one line and exits non-zero. */
export class ConfigError extends Error {}

type Env = Record<string, string | undefined>;

function integer(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  if (!/^\d+$/.test(raw.trim())) throw new ConfigError(`${name} must be a whole number, got "${raw}"`);
  const n = Number(raw.trim());
  if (n < min || n > max) throw new ConfigError(`${name} must be between ${min} and ${max}, got ${n}`);
  return n;
}

function url(env: Env, name: string, fallback: string): string {
  const raw = (env[name] ?? "").trim() || fallback;
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    throw new ConfigError(`${name} must be an absolute URL, got "${raw}"`);
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
    throw new ConfigError(`${name} must be an http(s) URL, got "${raw}"`);
  }
  return raw.replace(/\/+$/, "");
}

function optional(env: Env, name: string): string | undefined {
  const raw = env[name]?.trim();
  return raw ? raw : undefined;
}

export function parseRetryDelays(raw: string): number[] {
  const parts = raw.split(",").map((s) => s.trim());
  const delays = parts.map(Number);
  if (parts.some((p) => !/^\d+(\.\d+)?$/.test(p)) || delays.some((d) => d <= 0)) {
    throw new ConfigError(`WEBHOOK_RETRY_DELAYS must be positive seconds separated by commas, got "${raw}"`);
  }
  return delays;
}

/** userinfo (a user and password, or a token) is never repeated in an error. */
export function redactUserinfo(entry: string): string {
  return entry.replace(/^([A-Za-z][A-Za-z0-9+.-]*:\/\/)?[^@/]*@/, "$1***@");
}

function rateLimitStore(raw: string | undefined): "postgres" | "local" {
  if (raw === undefined || raw === "" || raw === "postgres") return "postgres";
  if (raw === "local") return "local";
  throw new ConfigError(`RATE_LIMIT_STORE must be postgres or local, got "${raw}"`);
}

/**
 * NATS_URL: one server, or a cluster's servers separated by commas (the client tries them in
 * turn and learns the rest of the cluster from whichever answers). Each entry is
 * nats://host:port, tls://host:port, or host:port; the entries are returned trimmed, joined by ",".
 */
export function parseNatsUrl(raw: string): string {
  const entries = raw.split(",").map((s) => s.trim());
  const expected = "nats://host:port, tls://host:port or host:port";
  entries.forEach((entry, i) => {
    const where = entries.length > 1 ? ` (entry ${i + 1} of ${entries.length})` : "";
    if (entry === "") throw new ConfigError(`NATS_URL has an empty entry${where}: separate servers with single commas`);
    const shown = redactUserinfo(entry);
    let parsed: URL;
    try {
      parsed = new URL(/^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(entry) ? entry : `nats://${entry}`);
    } catch {
      throw new ConfigError(`NATS_URL entry "${shown}"${where} is not a server address: use ${expected}`);
    }
    if (parsed.protocol !== "nats:" && parsed.protocol !== "tls:") {
      throw new ConfigError(`NATS_URL entry "${shown}"${where} has the scheme ${parsed.protocol.slice(0, -1)}: use ${expected}`);
    }
    if (parsed.hostname === "" || (parsed.pathname !== "" && parsed.pathname !== "/") || parsed.search !== "" || parsed.hash !== "") {
      throw new ConfigError(`NATS_URL entry "${shown}"${where} is not a server address: use ${expected}`);
    }
    if (parsed.port === "0") throw new ConfigError(`NATS_URL entry "${shown}"${where} has port 0: use the server's client port (default 4222)`);
  });
  return entries.join(",");
}

function encryptionKey(raw: string | undefined, name = "SECRET_ENCRYPTION_KEY"): Buffer | undefined {
  if (raw === undefined) return undefined;
  const key = /^[0-9a-fA-F]{64}$/.test(raw) ? Buffer.from(raw, "hex") : Buffer.from(raw, "base64");
  if (key.length !== 32) {
    throw new ConfigError(`${name} must be 32 bytes, as 64 hex digits or base64`);
  }
  return key;
}

function connectTo(raw: string | undefined): ConnectTo[] {
  try {
    return parseConnectTo(raw);
  } catch (err) {
    throw new ConfigError((err as Error).message);
  }
}

function grpcReflection(raw: string | undefined): Config["grpcReflection"] {
  if (raw === undefined) return "auto";
  if (raw === "on" || raw === "off" || raw === "auto") return raw;
  throw new ConfigError(`GRPC_REFLECTION must be on, off or auto, got "${raw}"`);
}

/** How a process on this machine reaches a listener bound to `host`: a wildcard is reached on loopback. */
export function dialable(host: string): string {
  if (host === "0.0.0.0" || host === "::" || host === "[::]") return "127.0.0.1";
  return host.includes(":") && !host.startsWith("[") ? `[${host}]` : host;
}

export function loadConfig(env: Env = process.env): Config {
  const port = integer(env, "PORT", 8080, 0, 65535);
  const publicBaseUrl = url(env, "PUBLIC_BASE_URL", `http://localhost:${port}`);
  const prefix = optional(env, "JETSTREAM_PREFIX");
  const watcherPollMs = integer(env, "WATCHER_POLL_MS", 2000, 50, 600_000);
  if (prefix !== undefined && !/^[A-Za-z0-9_-]{1,32}$/.test(prefix)) {
    throw new ConfigError(`JETSTREAM_PREFIX must be 1-32 of A-Z a-z 0-9 _ -, got "${prefix}"`);
  }
  const natsUrl = optional(env, "NATS_URL");
  const rpcPort = integer(env, "RPC_PORT", 8081, 0, 65535);
  const rpcHost = optional(env, "RPC_HOST") ?? "127.0.0.1";
  return {
    databaseUrl: optional(env, "DATABASE_URL"),
    natsUrl: natsUrl === undefined ? undefined : parseNatsUrl(natsUrl),
    jetstreamReplicas: integer(env, "JETSTREAM_REPLICAS", 1, 1, 5),
    port,
    rpcPort,
    rpcUrl: url(env, "RPC_URL", `http://${dialable(rpcHost)}:${rpcPort}`),
    opsPort: integer(env, "OPS_PORT", 9464, 0, 65535),
    host: optional(env, "HOST") ?? "127.0.0.1",
    rpcHost,
    opsHost: optional(env, "OPS_HOST") ?? "127.0.0.1",
    publicBaseUrl,
    checkoutBaseUrl: url(env, "CHECKOUT_BASE_URL", `${publicBaseUrl}/checkout`),
    dashboardBaseUrl: url(env, "DASHBOARD_BASE_URL", `${publicBaseUrl}/dashboard`),
    explorers: explorerSetting(optional(env, "EXPLORER_TX_URLS")),
    dashboardSessions: {
      idleSeconds: integer(env, "DASHBOARD_SESSION_IDLE_MINUTES", 30, 1, 7 * 24 * 60) * 60,
      maxSeconds: integer(env, "DASHBOARD_SESSION_MAX_HOURS", 12, 1, 30 * 24) * 3600,
    },
    dashboardSignInRateLimitPerMinute: integer(env, "DASHBOARD_SIGN_IN_RATE_LIMIT_PER_MINUTE", 10, 1, 1_000_000),
    jetstreamPrefix: prefix,
    webhookRetryDelaysSeconds: parseRetryDelays(env.WEBHOOK_RETRY_DELAYS?.trim() || "60,300,1800,7200,43200"),
    webhookMaxAttempts: integer(env, "WEBHOOK_MAX_ATTEMPTS", 6, 1, 100),
    webhookTimeoutMs: integer(env, "WEBHOOK_TIMEOUT_MS", 10_000, 100, 300_000),
    webhookConnectTo: connectTo(optional(env, "WEBHOOK_CONNECT_TO")),
    webhookConcurrency: integer(env, "WEBHOOK_CONCURRENCY", 64, 1, 1000),
    webhookEndpointConcurrency: integer(env, "WEBHOOK_ENDPOINT_CONCURRENCY", 4, 1, 1000),
    webhookEndpointFastMs: integer(env, "WEBHOOK_ENDPOINT_FAST_MS", 1000, 10, 300_000),
    webhookCircuitTimeouts: integer(env, "WEBHOOK_CIRCUIT_TIMEOUTS", 5, 0, 1000),
    webhookMaxAckPending: integer(env, "WEBHOOK_MAX_ACK_PENDING", 100_000, 10, 10_000_000),
    webhookStreamWaitSeconds: integer(env, "WEBHOOK_STREAM_WAIT_SECONDS", 300, 1, 86_400),
    webhookEndpointStreamRetries: integer(env, "WEBHOOK_ENDPOINT_STREAM_RETRIES", 1000, 1, 1_000_000),
    webhookMainLanePerSecond: integer(env, "WEBHOOK_MAIN_LANE_PER_SECOND", 40, 1, 1_000_000),
    webhookAutoDisableAfterSeconds: integer(env, "WEBHOOK_AUTO_DISABLE_AFTER_SECONDS", 5 * 86_400, 0, 365 * 86_400),
    webhookRecovery: {
      maxDays: integer(env, "WEBHOOK_RECOVERY_MAX_DAYS", 7, 1, 365),
      maxEvents: integer(env, "WEBHOOK_RECOVERY_MAX_EVENTS", 100_000, 1, 100_000_000),
      pageSize: integer(env, "WEBHOOK_RECOVERY_PAGE_SIZE", 1000, 1, 10_000),
    },
    secretEncryptionKey: encryptionKey(optional(env, "SECRET_ENCRYPTION_KEY")),
    secretEncryptionKeyPrevious: encryptionKey(optional(env, "SECRET_ENCRYPTION_KEY_PREVIOUS"), "SECRET_ENCRYPTION_KEY_PREVIOUS"),
    dataDir: path.resolve(optional(env, "DATA_DIR") ?? ".data"),
    logLevel: optional(env, "LOG_LEVEL") ?? "info",
    bodyLimitBytes: integer(env, "BODY_LIMIT_BYTES", 1024 * 1024, 1024, 64 * 1024 * 1024),
    httpKeepAliveSeconds: integer(env, "HTTP_KEEP_ALIVE_SECONDS", 75, 1, 3600),
    dbPoolSize: integer(env, "DB_POOL_SIZE", 10, 1, 200),
    publicRateLimitPerMinute: integer(env, "PUBLIC_RATE_LIMIT_PER_MINUTE", 60, 1, 1_000_000),
    credentialRateLimitPerMinute: integer(env, "SITE_RATE_LIMIT_PER_MINUTE", 120, 1, 1_000_000),
    apiRateLimit: {
      reads: integer(env, "API_READ_RATE_LIMIT", 100, 1, 1_000_000),
      writes: integer(env, "API_WRITE_RATE_LIMIT", 100, 1, 1_000_000),
      seconds: integer(env, "API_RATE_LIMIT_SECONDS", 1, 1, 86_400),
    },
    siteReadRateLimitPerMinute: integer(env, "SITE_READ_RATE_LIMIT_PER_MINUTE", 600, 1, 1_000_000),
    // A checkout page polls its status every 3 s (20 a minute): 120 leaves room for a few shoppers behind one address.
    checkoutRateLimitPerMinute: integer(env, "CHECKOUT_RATE_LIMIT_PER_MINUTE", 120, 1, 1_000_000),
    terminalRateLimit: {
      perSession: integer(env, "TERMINAL_RATE_LIMIT_PER_MINUTE", 30, 1, 1_000_000),
      perAddress: integer(env, "TERMINAL_ADDRESS_RATE_LIMIT_PER_MINUTE", 120, 1, 1_000_000),
    },
    rateLimitProcesses: integer(env, "RATE_LIMIT_PROCESSES", 1, 1, 1_000),
    rateLimitStore: rateLimitStore(env.RATE_LIMIT_STORE),
    // None by default: only the connection's peer counts, so nothing on the host that forwards
    // traffic can let a client pick the address its limits count against.
    trustedProxies: trustedProxies(env.TRUSTED_PROXIES ?? ""),
    chainEndpoints: chainEndpoints(env),
    operatorWatchedNetworks: parseOperatorWatchedNetworks(optional(env, "OPERATOR_WATCHED_NETWORKS")),
    watcherPollMs,
    watcherMempoolMs: integer(env, "WATCHER_MEMPOOL_MS", watcherPollMs, 50, 3_600_000),
    watcherLeaseSeconds: integer(env, "WATCHER_LEASE_SECONDS", 15, 5, 300),
    watcherNodeProofSeconds: integer(env, "WATCHER_NODE_PROOF_SECONDS", 60, 1, 3600),
    confirmationOverrides: confirmationOverrides(env),
    maxReorgDepth: maxReorgDepth(env),
    latePaymentWindowSeconds: integer(env, "LATE_PAYMENT_WINDOW_SECONDS", 86_400, 0, 365 * 86_400),
    exceptionWatchSeconds: integer(env, "EXCEPTION_WATCH_SECONDS", 7 * 86_400, 0, 365 * 86_400),
    mempoolAbsence: { reads: integer(env, "MEMPOOL_ABSENT_READS", 3, 1, 1000), seconds: integer(env, "MEMPOOL_ABSENT_SECONDS", 60, 0, 86_400) },
    watcherCredentials: { test: optional(env, "WATCHER_CREDENTIAL_TEST"), live: optional(env, "WATCHER_CREDENTIAL_LIVE") },
    apiKeyMaxAgeDays: integer(env, "API_KEY_MAX_AGE_DAYS", 365, 1, 3650),
    grpcReflection: grpcReflection(optional(env, "GRPC_REFLECTION")),
    rates: rateSettings(env),
    quotes: quoteSettings(env),
    retention: retentionSettings(env),
  };
}

function explorerSetting(raw: string | undefined): Explorers {
  try {
    return explorersFrom(raw);
  } catch (err) {
    throw new ConfigError((err as Error).message);
  }
}
