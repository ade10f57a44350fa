import { createClient, createContextValues } from "@connectrpc/connect";
import { CheckoutService, SiteService } from "../../gen/payments/v1/shopper_pb.ts";
import { RefundClaimService } from "../../gen/payments/v1/refunds_pb.ts";
import { refundClaimPages } from "../refunds/claim-handler.ts";
import type { Limiter } from "../platform/rate-limit.ts";
import { checkoutLookup, checkoutPages } from "../checkout/handler.ts";
import { dashboardPages } from "../dashboard/handler.ts";
import { dashboardCallSecret } from "../auth/dashboard-sessions.ts";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { rootPages } from "../dashboard/root.ts";
import { createGateway } from "../../gateway/server.ts";
import { startWorkerRole } from "../delivery/worker-role.ts";
import { OutboxWake } from "../delivery/outbox-wake.ts";
import { attemptSpanSeconds, schedule as retrySchedule } from "../delivery/schedule.ts";
import { ConfigError, type Config } from "../platform/config.ts";
import { ClientAddresses, clientAddressKey } from "../platform/client-address.ts";
import { CursorCodec } from "../platform/cursor.ts";
import { SharedBuckets, sharedBucketsOn } from "../platform/rate-limit.ts";
import { migrate, type Database } from "../platform/db.ts";
import { openDatabase } from "./database.ts";
import { apiAcceptors, listen } from "../platform/listen.ts";
import type { Logger } from "../platform/logger.ts";
import { Nats } from "../platform/nats.ts";
import { deriveKey } from "../platform/secret-key.ts";
import { createServiceInterceptor, type Limits } from "../rpc/interceptor.ts";
import { CredentialCache, settleCredentialChanges } from "../auth/credential-cache.ts";
import { KeyLastUse } from "../auth/key-last-use.ts";
import { createInputGuard } from "../rpc/input-guard.ts";
import { oneStatementMethods, routes, services } from "./routes.ts";
import { reflectionGate } from "../rpc/reflection.ts";
import { startRpcServer } from "../rpc/server.ts";
import { createLocalTransport } from "../rpc/local-transport.ts";
import { checkSecretKey } from "../webhooks/key-check.ts";
import { SecretBox } from "../platform/secrets.ts";
import { Intents } from "../intents/intents.ts";
import { liveRatesRefusal, RateEngine, ratesWarning } from "../rates/engine.ts";
import { liveKeysInUse } from "../auth/live-keys.ts";
import { IntentViews } from "../intents/views.ts";
import { ChainCoverage } from "../chains/coverage.ts";
import { createOpsServer } from "./ops.ts";
import { createMetrics } from "./metrics.ts";
import { startPartitionKeeper, startRequoteSweep, startRetention, startScheduler, startValuationSweep } from "./scheduler.ts";
import { intentOutputs } from "../chains/outputs.ts";
import { ensurePartitions } from "../retention/partitions.ts";
import { startWatcher } from "./watcher-process.ts";
import { InProcessWatcherCredentials } from "../auth/watcher-credentials.ts";

/** The roles a process can run; `npm start` with none runs them all (the watcher only when a chain endpoint is configured). */
export const allRoles = ["rpc", "gateway", "worker", "scheduler", "watcher"] as const;
export type Role = (typeof allRoles)[number];

export interface AppOptions {
  config: Config;
  logger: Logger;
  databaseUrl: string;
  natsUrl: string;
  masterKey: Buffer;
  roles: readonly Role[];
}

export interface App {
  db: Database;
  nats: Nats;
  ports: { gateway?: number; rpc?: number; ops: number };
  /** The worker role's JetStream prefix (JETSTREAM_PREFIX, or the installation's own). */
  jetstreamPrefix: string | undefined;
  /**
   * Stops the roles in order (once: a second call waits for the first); onStep hears each step's
   * name as it begins. The whole stop takes at most `stopBudgetMs`: a part that has not stopped
   * by its share of it (a pool or listener waiting on a database that went silent, say) is given
   * up on, named to onGaveUp, and the next part stops; the process's exit ends what is left.
   */
  stop(onStep?: (step: string) => void, onGaveUp?: (step: string) => void): Promise<void>;
}

/** How long a stop may take in all, and the least time each of its parts gets. */
const stopBudgetMs = 15_000;
const minStepMs = 500;

/** Whether `p` settles within `ms`; a rejection is passed on. */
function finishesWithin(p: Promise<void>, ms: number): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => resolve(false), ms);
    p.then(
      () => {
        clearTimeout(timer);
        resolve(true);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err);
      },
    );
  });
}

/** Starts the given roles in this process; stop() shuts them down in order, finishing in-flight work. */
export async function startApp(o: AppOptions): Promise<App> {
  const { config, logger, roles } = o;
  const db = await openDatabase(o.databaseUrl, config.dbPoolSize);
  const secrets = SecretBox.fromMasterKeys(o.masterKey, config.secretEncryptionKeyPrevious);
  try {
    const applied = await migrate(db);
    if (applied.length > 0) logger.info({ migrations: applied }, "applied migrations");
    // A key that cannot open the stored signing secrets would lose every webhook: refuse to start.
    await checkSecretKey(db.em.fork(), secrets);
    // Quotes are made in the rpc role: with Live keys in use, rate settings that would let one
    // source's word price a Live intent stop the start (the engine holds Live to two sources anyway).
    if (roles.includes("rpc")) {
      const refusal = liveRatesRefusal(config.rates);
      if (refusal !== undefined && (await liveKeysInUse(db.em.fork()))) throw new ConfigError(refusal);
    }
  } catch (err) {
    await db.close();
    throw err;
  }
  const nats = new Nats(o.natsUrl, logger, `payments-${roles.join("+")}`);
  const metrics = createMetrics({ roles, db, nats });
  // Quotes are made where creates are handled (the rpc role), from rates read in the background.
  const rates = roles.includes("rpc") ? new RateEngine(config.rates, { registry: metrics.registry, logger }) : undefined;
  // Which chains a watcher follows (this process's config, OPERATOR_WATCHED_NETWORKS, the chains
  // watchers report): a Live create elsewhere is refused, a Test one carries a notice.
  const coverage = new ChainCoverage({ configured: config.chainEndpoints, operatorNetworks: config.operatorWatchedNetworks });
  await coverage.start(() => db.em.fork(), logger);
  // A create here wakes this process's relay after its commit, when it runs one (outbox-wake.ts).
  const outboxWake = new OutboxWake();
  const intents = new Intents(new IntentViews(config.checkoutBaseUrl, config.confirmationOverrides, { lateWindowSeconds: config.latePaymentWindowSeconds, watch: coverage }), undefined, rates, config.quotes, outboxWake, roles.includes("rpc") ? metrics.registry : undefined);
  const serviceRoutes = routes({
    intents,
    cursors: new CursorCodec(deriveKey(o.masterKey, "list-cursor")),
    secrets,
    connectTo: config.webhookConnectTo,
    eventRetentionSeconds: config.retention.eventSeconds,
    readiness: {
      publicBaseUrl: config.publicBaseUrl,
      apiKeyMaxAgeDays: config.apiKeyMaxAgeDays,
      rates: rates && ((environment) => rates.fresh(environment)),
      operatorWatchedNetworks: config.operatorWatchedNetworks,
    },
    watch: { lateSeconds: config.latePaymentWindowSeconds, exceptionSeconds: config.exceptionWatchSeconds },
    maxReorgDepth: (network) => config.maxReorgDepth[network as keyof typeof config.maxReorgDepth] ?? 1,
    mempoolAbsence: config.mempoolAbsence,
    recoveryBounds: config.webhookRecovery,
    dashboardBaseUrl: config.dashboardBaseUrl,
    dashboardSessions: config.dashboardSessions,
    // An API key revoked through the API is refused by every process before the revoke answers.
    settleCredentials: () => settleCredentialChanges(o.databaseUrl),
  });
  const stops: { step: string; stop: () => Promise<void> }[] = [{ step: "chain coverage", stop: async () => coverage.stop() }];
  // Verified credentials are cached where they are checked (the rpc role); revocations arrive by NOTIFY.
  const credentials = new CredentialCache();
  const credentialListener = roles.includes("rpc") ? credentials.listen(o.databaseUrl, logger) : undefined;
  const clientAddresses = new ClientAddresses(config.trustedProxies);
  // Every rpc process takes from the same buckets in PostgreSQL, so a budget does not grow with the processes.
  const { buckets, close: closeBuckets } =
    config.rateLimitStore === "postgres"
      ? sharedBucketsOn(o.databaseUrl, logger, { processes: config.rateLimitProcesses })
      : { buckets: new SharedBuckets(undefined, logger, { processes: config.rateLimitProcesses }), close: async () => undefined };
  const limits: Limits = {
    perAddress: buckets.budget("public", config.publicRateLimitPerMinute, 60),
    // The checkout page and the refund claim page share one budget per client address: both are pages a shopper opens.
    perAddressOf: pageBudget(buckets.budget("checkout", config.checkoutRateLimitPerMinute, 60)),
    perCredential: buckets.budget("credential", config.credentialRateLimitPerMinute, 60),
    apiReads: buckets.budget("api-reads", config.apiRateLimit.reads, config.apiRateLimit.seconds),
    apiWrites: buckets.budget("api-writes", config.apiRateLimit.writes, config.apiRateLimit.seconds),
    siteReads: buckets.budget("site-reads", config.siteReadRateLimitPerMinute, 60),
    cashier: {
      perSession: buckets.budget("cashier", config.terminalRateLimit.perSession, 60),
      perAddress: buckets.budget("cashier-address", config.terminalRateLimit.perAddress, 60),
    },
  };
  // Each key's last use, recorded where calls are authenticated (the rpc role), a minute apart at most.
  const lastUse = new KeyLastUse(db, logger);
  const interceptors = [metrics.rpcInterceptor, createServiceInterceptor(db, logger, {
      credentials,
      lastUse,
      oneStatement: oneStatementMethods,
      limits,
      idempotencyRetentionSeconds: config.retention.idempotencySeconds,
    }), createInputGuard()];
  // Beside the rpc role, the gateway and the watcher call the handlers directly (no encoding).
  const inProcess = roles.includes("rpc") ? createLocalTransport(serviceRoutes, interceptors) : undefined;
  const ports: App["ports"] = { ops: 0 };
  let jetstreamPrefix: string | undefined;
  try {
    if (rates) {
      rates.start();
      // Where rates are read, payments seen while none was fresh get their fiat value (intents/valuation.ts).
      const valuation = startValuationSweep(db, logger, intents, intentOutputs, rates.settings.refreshSeconds * 1000);
      stops.push({ step: "valuation sweep", stop: valuation.stop });
      // And quotes that lapsed are quoted again at the rate of the moment (intents/requote.ts).
      const requote = startRequoteSweep(db, logger, intents, intentOutputs);
      stops.push({ step: "requote sweep", stop: requote.stop });
      stops.push({ step: "rate engine", stop: () => rates.stop() });
    }
    if (roles.includes("rpc")) {
      const rpc = await startRpcServer(serviceRoutes, interceptors, config.rpcHost, config.rpcPort, {
        bodyLimitBytes: config.bodyLimitBytes,
        reflection: reflectionGate(config.grpcReflection, db),
        clientAddresses,
        dashboardCallSecrets: [o.masterKey, config.secretEncryptionKeyPrevious].filter((k) => k !== undefined).map(dashboardCallSecret),
      });
      ports.rpc = rpc.port;
      stops.push({ step: "rpc server", stop: rpc.close });
      if (credentialListener) stops.push({ step: "credential listener", stop: credentialListener.stop });
      stops.push({ step: "API key last use", stop: () => lastUse.flush() });
    }
    if (roles.includes("gateway")) {
      // Alone, the gateway reaches the rpc role over gRPC.
      const transport = inProcess ?? createGrpcTransport({ baseUrl: config.rpcUrl });
      const siteClient = createClient(SiteService, transport);
      const gateway = await listen(
        createGateway({
          services,
          transport,
          logger,
          bodyLimitBytes: config.bodyLimitBytes,
          keepAliveTimeoutMs: config.httpKeepAliveSeconds * 1000,
          clientAddresses,
          // The preflight counts against the browser's address (CheckSiteOrigin is limited per address).
          corsOriginAllowed: async (origin, address) =>
            (await siteClient.checkSiteOrigin({ origin }, { headers: { "x-forwarded-for": address }, contextValues: createContextValues().set(clientAddressKey, address) })).allowed,
          observe: metrics.observeHttp,
          // The dashboard first: a checkout served at the root would otherwise take its paths.
          pages: [
            dashboardPages({
              dashboardBaseUrl: config.dashboardBaseUrl,
              explorers: config.explorers,
              transport,
              signInLimiter: buckets.budget("dashboard-sign-in", config.dashboardSignInRateLimitPerMinute, 60),
              callProofSecret: inProcess ? undefined : dashboardCallSecret(o.masterKey),
              logger,
            }),
            rootPages({ dashboardBaseUrl: config.dashboardBaseUrl }),
            // The refund claim pages live under the checkout's path: before it, which would answer them not found.
            refundClaimPages({ checkoutBaseUrl: config.checkoutBaseUrl, transport, logger }),
            checkoutPages({ checkoutBaseUrl: config.checkoutBaseUrl, getCheckout: checkoutLookup(transport), logger }),
          ],
        }),
        config.host,
        config.port,
        // Merchants' clients and shoppers' browsers open connections at a burst (listen.ts).
        { acceptors: apiAcceptors },
      );
      ports.gateway = gateway.port;
      stops.unshift({ step: "gateway", stop: gateway.close });
    }
    if (roles.includes("worker")) {
      const worker = await startWorkerRole({ config, db, databaseUrl: o.databaseUrl, nats, secrets, logger, onAttempt: metrics.onAttempt, outboxWake });
      jetstreamPrefix = worker.prefix;
      metrics.watchConsumer(worker.prefix);
      metrics.watchWorker(worker.stats);
      stops.push({ step: "delivery worker", stop: worker.stop });
    }
    if (roles.includes("watcher")) {
      // Beside the rpc role, the watcher's credentials are this process's own: short-lived, renewed
      // while it runs, revoked once the watcher has stopped (before the database pool closes).
      const watcherCredentials = inProcess ? new InProcessWatcherCredentials(() => db.em.fork(), logger) : undefined;
      if (watcherCredentials) stops.push({ step: "watcher credentials", stop: () => watcherCredentials.revoke() });
      // Each environment's credential speaks for the networks its endpoints follow there, and no other.
      const followedIn = (environment: "test" | "live") => config.chainEndpoints.filter((e) => e.environment === environment).map((e) => e.network);
      const local =
        inProcess && watcherCredentials
          ? { transport: inProcess, issueCredential: (environment: "test" | "live") => watcherCredentials.issue(environment, followedIn(environment)) }
          : undefined;
      const watcher = await startWatcher({ config, logger, registry: metrics.registry, local });
      stops.unshift({ step: "chain watcher", stop: watcher.stop });
    }
    // The days ahead exist before anything is served (a first start has only the legacy partition);
    // the keeper keeps them so, and retries what fails here.
    await ensurePartitions(db.em.fork()).catch((err: unknown) => logger.warn({ err }, "partitions: could not make the days ahead at start"));
    const partitions = startPartitionKeeper(db, logger);
    stops.push({ step: "partition keeper", stop: partitions.stop });
    if (roles.includes("scheduler")) {
      const scheduler = startScheduler(db, logger, intents, {
        autoDisableAfterSeconds: config.webhookAutoDisableAfterSeconds,
        attemptSpanSeconds: attemptSpanSeconds(retrySchedule(config.webhookRetryDelaysSeconds, config.webhookMaxAttempts)),
      });
      stops.push({ step: "scheduler", stop: scheduler.stop });
      const retention = startRetention(db, logger, config.retention, metrics.retentionRun);
      stops.push({ step: "retention job", stop: retention.stop });
    }
    const ops = await listen(createOpsServer(db, nats, metrics.registry, config.retention, rates && (() => ratesWarning(rates))), config.opsHost, config.opsPort);
    ports.ops = ops.port;
    stops.push({ step: "ops server", stop: ops.close });
  } catch (err) {
    for (const { stop } of stops) await stop();
    await credentialListener?.stop();
    await closeBuckets();
    await nats.close();
    await db.close();
    throw err;
  }
  let stopped: Promise<void> | undefined;
  return {
    db,
    nats,
    ports,
    jetstreamPrefix,
    stop(onStep, onGaveUp) {
      return (stopped ??= (async () => {
        const steps = [...stops, { step: "NATS connection", stop: () => nats.close() }, { step: "rate limit pool", stop: closeBuckets }, { step: "database pool", stop: () => db.close() }];
        const deadline = Date.now() + stopBudgetMs;
        for (const [i, { step, stop }] of steps.entries()) {
          onStep?.(step);
          // Each part may use what is left of the budget, less a minimum kept for each part after it.
          const share = Math.max(minStepMs, deadline - Date.now() - minStepMs * (steps.length - 1 - i));
          if (!(await finishesWithin(stop(), share))) onGaveUp?.(step);
        }
      })());
    },
  };
}

/** The public calls behind the hosted pages (checkout, refund claim): one budget per client address, CHECKOUT_RATE_LIMIT_PER_MINUTE. */
function pageBudget(limiter: Limiter): Map<string, Limiter> {
  const methods = [CheckoutService.method.getCheckout, RefundClaimService.method.getRefundClaim, RefundClaimService.method.submitRefundAddress];
  return new Map(methods.map((m) => [`${m.parent.typeName}/${m.name}`, limiter]));
}
