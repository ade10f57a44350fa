import http from "node:http";
import type { Transport } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { collectDefaultMetrics, Registry } from "prom-client";
import { ConfigError, type Config } from "../platform/config.ts";
import { listen } from "../platform/listen.ts";
import type { Logger } from "../platform/logger.ts";
import { checkEndpoints } from "../watcher/chain-reader.ts";
import { credentialEnvironment } from "../watcher/core-client.ts";
import { startWatcherRole } from "../watcher/role.ts";

/**
 * Starts the watcher role. Beside the rpc role (`local`) it calls the handlers in-process with a
 * credential of this process's own (short-lived and renewed, see services/auth/watcher-credentials.ts);
 * alone, it reaches RPC_URL with WATCHER_CREDENTIAL_<ENV>. Each credential's environment is asked
 * of the core first (GetChainCredential): one of the other environment stops the start.
 * Configuration that cannot work is a ConfigError (one line at start).
 */
export async function startWatcher(o: {
  config: Config;
  logger: Logger;
  registry: Registry;
  local?: { transport: Transport; issueCredential(environment: "test" | "live"): Promise<string> };
}): Promise<{ stop(): Promise<void> }> {
  const { config } = o;
  if (config.chainEndpoints.length === 0) {
    throw new ConfigError("the watcher role follows no chain: set an endpoint such as ETHEREUM_TEST_RPC_URL (<NETWORK>_<ENVIRONMENT>_RPC_URL)");
  }
  const credentials: { test?: string; live?: string } = {};
  // What to create for an environment: a credential that speaks for the chains this watcher follows there.
  const create = (environment: "test" | "live") =>
    `npm run -s admin -- internal-credential create --name watcher --roles observe --environment ${environment} --networks ${[...new Set(config.chainEndpoints.filter((e) => e.environment === environment).map((e) => e.network))].join(",")}`;
  for (const environment of new Set(config.chainEndpoints.map((e) => e.environment))) {
    credentials[environment] = o.local ? await o.local.issueCredential(environment) : config.watcherCredentials[environment];
    if (!credentials[environment]) {
      throw new ConfigError(
        `a watcher without the rpc role needs WATCHER_CREDENTIAL_${environment.toUpperCase()} (${create(environment)})`,
      );
    }
  }
  const transport = o.local?.transport ?? createGrpcTransport({ baseUrl: config.rpcUrl });
  // A credential of the other environment would have one environment's chain pay the other's intents.
  for (const [environment, credential] of Object.entries(credentials) as ["test" | "live", string][]) {
    const name = o.local ? `the in-process watcher's ${environment} credential` : `WATCHER_CREDENTIAL_${environment.toUpperCase()}`;
    let actual: string;
    try {
      actual = await credentialEnvironment(transport, credential);
    } catch (err) {
      throw new ConfigError(`${name}: the core at ${config.rpcUrl} could not say which environment the credential is of (${(err as Error).message.split("\n")[0]}); the watcher follows no chain until it can`);
    }
    if (actual !== environment) {
      throw new ConfigError(
        `${name} is a credential of ${actual === "live" ? "Live" : actual === "test" ? "Test" : actual}, not ${environment === "live" ? "Live" : "Test"}: a ${environment === "live" ? "Live" : "Test"} watcher reports with a credential of its own environment (${create(environment)})`,
      );
    }
  }
  const wrong = await checkEndpoints(config.chainEndpoints, o.logger);
  if (wrong) throw new ConfigError(wrong);
  return startWatcherRole({
    endpoints: config.chainEndpoints,
    pollMs: config.watcherPollMs,
    mempoolMs: config.watcherMempoolMs,
    leaseSeconds: config.watcherLeaseSeconds,
    nodeProofSeconds: config.watcherNodeProofSeconds,
    coreFor: (environment) => ({ transport, credential: credentials[environment] as string }),
    logger: o.logger,
    registry: o.registry,
  });
}

/**
 * A process that only watches chains (`npm start -- watcher`): no database and no broker of its
 * own, so it can run beside the node on another machine; its ops port serves /healthz and /metrics.
 */
export async function startWatcherProcess(config: Config, logger: Logger): Promise<{ ops: number; stop(): Promise<void> }> {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const watcher = await startWatcher({ config, logger, registry });
  const server = http.createServer(async (req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    if (req.method === "GET" && path === "/healthz") {
      res.writeHead(200, { "Content-Type": "application/json" });
      return res.end(JSON.stringify({ status: "ok" }));
    }
    if (req.method === "GET" && path === "/metrics") {
      res.writeHead(200, { "Content-Type": registry.contentType, "Cache-Control": "no-store" });
      return res.end(await registry.metrics());
    }
    res.writeHead(404, { "Content-Type": "application/json" });
    res.end(JSON.stringify({ status: "not_found" }));
  });
  const ops = await listen(server, config.opsHost, config.opsPort);
  return {
    ops: ops.port,
    async stop() {
      await watcher.stop();
      await ops.close();
    },
  };
}
