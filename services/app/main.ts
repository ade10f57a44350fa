// The service CLI: `main.ts [rpc] [gateway] [worker] [scheduler] [watcher]` runs those roles (all by default,
// the watcher when a chain endpoint is configured); `main.ts migrate` applies pending migrations and exits.
import { ConfigError, loadConfig, type ChainEndpoint, type Config } from "../platform/config.ts";
import { migrate } from "../platform/db.ts";
import { openDatabase } from "./database.ts";
import { createLogger } from "../platform/logger.ts";
import { loadOrCreateKey } from "../platform/secret-key.ts";
import { recordOnce } from "../platform/settings.ts";
import { allRoles, startApp, type Role } from "./app.ts";
import { recordServerDatabase, resolveDatabase, resolveNats } from "./resources.ts";
import { startWatcherProcess } from "./watcher-process.ts";
import { redactNodeUrl } from "../watcher/evm-node.ts";

const args = process.argv.slice(2);

// A stop signal that comes while the process starts is kept and acted on once it has started: by
// Node's default it would end the process mid-start, with no clean stop and no exit code.
// A start that hangs (a database that does not answer) still ends 20 s after the signal.
let earlySignal: string | undefined;
let startHangs: NodeJS.Timeout | undefined;
const keepEarly = (signal: string) => {
  earlySignal ??= signal;
  startHangs ??= setTimeout(() => fatal(`${signal} while starting, and the start did not finish within 20 s`), 20_000).unref();
};
process.on("SIGTERM", keepEarly);
process.on("SIGINT", keepEarly);

/** A followed chain's start line: its nodes, never their paths or keys, and whether a second one must agree. */
function followedAt(e: ChainEndpoint): string {
  const chain = `${e.network} (${e.environment}) followed at ${redactNodeUrl(e.url)}`;
  if (e.witnesses.length > 0) return `${chain}, each block agreed by ${e.witnesses.map(redactNodeUrl).join(" or ")}`;
  // Bitcoin blocks carry their proof of work (checked); an EVM block is one node's word.
  if (e.environment === "live" && e.network !== "bitcoin") return `${chain} (one node's word: name a second in ${e.network.toUpperCase()}_LIVE_RPC_URL to have it agree)`;
  return chain;
}

/** The rate sources' start line: which are read, and how many must agree. */
function rateSourcesLine(r: Config["rates"]): string {
  const exchanges = r.sources.filter((s) => s !== "fixed");
  const fixed = r.sources.includes("fixed") ? "fixed (development rates, Test only)" : undefined;
  const read = exchanges.length > 0 ? `${exchanges.join(", ")} (RATE_SOURCES), ${r.minSources} must agree (RATE_MIN_SOURCES)` : undefined;
  return [read, fixed].filter((x) => x !== undefined).join("; ");
}

/** Stops on SIGTERM or SIGINT from now on, and at once if one came during the start. */
function stopOn(stop: (signal: string) => void): void {
  process.off("SIGTERM", keepEarly);
  process.off("SIGINT", keepEarly);
  clearTimeout(startHangs);
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
  if (earlySignal !== undefined) stop(earlySignal);
}

/** One line on stderr and exit 1: what failed and what to do, never a stack trace. */
function fatal(message: string): never {
  process.stderr.write(`payments: ${message.replace(/\s*\n\s*/g, " ")}\n`);
  process.exit(1);
}

let config: Config;
try {
  config = loadConfig();
} catch (err) {
  fatal(err instanceof ConfigError ? err.message : String(err));
}
const logger = createLogger(config.logLevel);

if (args[0] === "migrate") {
  let applied: string[];
  try {
    const resources = await resolveDatabase(config, logger);
    const db = await openDatabase(resources.databaseUrl, 2);
    applied = await migrate(db);
    await db.close();
    await resources.stopDatabase();
  } catch (err) {
    fatal(`could not migrate: ${(err as Error).message}`);
  }
  process.stdout.write(applied.length ? `applied: ${applied.join(", ")}\n` : "no pending migrations\n");
  process.exit(0);
}

const unknown = args.filter((a) => !(allRoles as readonly string[]).includes(a));
if (unknown.length > 0) fatal(`unknown role ${unknown.join(", ")}; roles are ${allRoles.join(", ")}, or "migrate"`);
// All in one: the watcher too, when a chain endpoint is configured.
const roles: Role[] = args.length > 0 ? (args as Role[]) : allRoles.filter((r) => r !== "watcher" || config.chainEndpoints.length > 0);

if (roles.length === 1 && roles[0] === "watcher") {
  // Watching only: no database or broker of its own; the core is reached over gRPC.
  let watcher: Awaited<ReturnType<typeof startWatcherProcess>>;
  try {
    watcher = await startWatcherProcess(config, logger);
  } catch (err) {
    fatal(err instanceof ConfigError ? err.message : `could not start: ${(err as Error).message}`);
  }
  process.stdout.write(
    [
      "",
      "Payment Intent service: watcher",
      ...config.chainEndpoints.map((e) => `  chain        ${followedAt(e)}, for the core at ${config.rpcUrl}`),
      `  health       http://${inUrl(config.opsHost)}:${watcher.ops}/healthz  metrics: /metrics`,
      "",
    ].join("\n") + "\n",
  );
  logger.info({ roles, ports: { ops: watcher.ops } }, "started");
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, "shutting down");
    await watcher.stop();
    logger.info("stopped");
    process.exit(0);
  };
  stopOn((signal) => void stop(signal));
} else {
  await runService(roles);
}

async function runService(roles: Role[]): Promise<void> {
  let resources: Awaited<ReturnType<typeof resolveDatabase>>;
  let nats: Awaited<ReturnType<typeof resolveNats>>;
  let app: Awaited<ReturnType<typeof startApp>>;
  try {
    resources = await resolveDatabase(config, logger);
    recordServerDatabase(config);
    nats = await resolveNats(config, logger);
    if (config.webhookConnectTo.length > 0) {
      logger.warn({ WEBHOOK_CONNECT_TO: process.env.WEBHOOK_CONNECT_TO }, "WEBHOOK_CONNECT_TO is set: these webhook hosts skip the public-address check (tests only)");
    }
    app = await startApp({
      config,
      logger,
      roles,
      databaseUrl: resources.databaseUrl,
      natsUrl: nats.url,
      masterKey: loadOrCreateKey(config.secretEncryptionKey, config.dataDir),
    });
  } catch (err) {
    // A setting refused once the database is read (rate settings with Live keys in use) says only why, as at load.
    fatal(err instanceof ConfigError ? err.message : `could not start: ${(err as Error).message}`);
  }

  const { gateway, rpc, ops } = app.ports;
  // Said at an installation's first start only: at every start it was noise, and the README has the commands.
  // A database that cannot record it (or not within 2 s: the banner is what tells that the start is done) gets it again rather than never.
  const firstStart = await Promise.race([
    recordOnce(app.db.em.fork(), "api_key_hint_said", "1").catch(() => true),
    new Promise<boolean>((resolve) => setTimeout(() => resolve(true), 2000).unref()),
  ]);
  const lines = [
    "",
    `Payment Intent service: ${roles.join(", ")}`,
    // A route that answers (401 without a key), not the bare /api/v1 prefix, which is a 404.
    gateway !== undefined ? `  REST API     http://${inUrl(config.host)}:${gateway}/api/v1/merchants/{merchant}/payment-intents  (Authorization: Bearer <API key>)` : null,
    gateway !== undefined ? `  dashboard    http://${inUrl(config.host)}:${gateway}${new URL(config.dashboardBaseUrl).pathname}  (sign in with an API key, or a link from: npm run -s admin -- dashboard-link)` : null,
    rpc !== undefined ? `  gRPC/Connect http://${inUrl(config.rpcHost)}:${rpc}  (gRPC over h2c; Connect and gRPC-Web over h2c or HTTP/1.1)` : null,
    `  health       http://${inUrl(config.opsHost)}:${ops}/healthz  readiness: /readyz  metrics: /metrics`,
    `  OpenAPI      http://${inUrl(config.opsHost)}:${ops}/openapi.json  (the REST API's document)`,
    app.jetstreamPrefix !== undefined ? `  webhooks     JetStream prefix ${app.jetstreamPrefix} on ${nats.url}` : null,
    resources.embeddedDatabase ? `  database     embedded PostgreSQL under ${resources.embeddedDatabase}` : null,
    ...(roles.includes("watcher") ? config.chainEndpoints.map((e) => `  chain        ${followedAt(e)}`) : []),
    // Where fiat prices come from: an offline machine's refused creates are explained by this line.
    roles.includes("rpc") ? `  rates        ${rateSourcesLine(config.rates)}` : null,
    "",
    ...(firstStart
      ? [
          "Get an API key (in another terminal):",
          "  npm run -s admin -- merchant create --name 'My Shop'",
          "  npm run -s admin -- api-key create --merchant <id> --environment test --scopes payment_intents:read,payment_intents:write,webhooks:read,webhooks:write",
          "",
        ]
      : []),
  ];
  process.stdout.write(lines.filter((l) => l !== null).join("\n") + "\n");
  logger.info({ roles, ports: app.ports }, "started");

  let stopping = false;
  async function shutdown(signal: string) {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, "shutting down");
    // How long each part took, and, if the shutdown hangs, which part did not finish.
    const took: Record<string, number> = {};
    let step = "";
    let stepStarted = Date.now();
    const begin = (next: string) => {
      if (step !== "") took[step] = Date.now() - stepStarted;
      step = next;
      stepStarted = Date.now();
    };
    const force = setTimeout(() => fatal(`shutdown took longer than 20 s (still stopping: ${step}; done: ${JSON.stringify(took)})`), 20_000);
    force.unref();
    // Parts that did not stop within their share of the stop's budget (e.g. waiting on a silent database).
    const gave_up: string[] = [];
    try {
      await app.stop(begin, (part) => {
        gave_up.push(part);
        logger.warn({ part }, "gave up waiting for a part to stop");
      });
      begin("embedded NATS server");
      await nats.stop();
      begin("embedded database");
      await resources.stopDatabase();
      begin("");
    } catch (err) {
      logger.error({ err }, "shutdown failed");
      process.exitCode = 1;
    }
    logger.info({ signal, ms: took, ...(gave_up.length > 0 ? { gave_up } : {}) }, "stopped");
    // The logger writes asynchronously: exiting before it has written would lose the last lines.
    await new Promise<void>((resolve) => {
      setTimeout(resolve, 2000).unref();
      logger.flush(() => resolve());
    });
    process.exit();
  }
  stopOn((signal) => void shutdown(signal));
}

/** A listen address as a URL's host: an IPv6 one in brackets. */
function inUrl(host: string): string {
  return host.includes(":") ? `[${host}]` : host;
}
