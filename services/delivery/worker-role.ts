import type { NatsConnection } from "@nats-io/transport-node";
import type { Config } from "../platform/config.ts";
import type { Database } from "../platform/db.ts";
import type { Logger } from "../platform/logger.ts";
import type { Nats } from "../platform/nats.ts";
import { installationId, recordOnce } from "../platform/settings.ts";
import type { SecretBox } from "../platform/secrets.ts";
import { StreamSetupRefused, deliveryPrefix, ensureDeliveryStream, streamNames } from "./jetstream.ts";
import { laneShare } from "./lanes.ts";
import { startRelay } from "./relay.ts";
import type { OutboxWake } from "./outbox-wake.ts";
import { schedule as retrySchedule } from "./schedule.ts";
import { startDeliveryWorker, type WorkerOptions, type WorkerStats } from "./worker.ts";

/** The first nats-server release with the fix for nats-server #6085 (PR #6104). */
const pendingTimerFixed = [2, 10, 23] as const;

function olderThan(version: string, than: readonly number[]): boolean {
  const parts = version.split(/[.-]/).map((p) => Number.parseInt(p, 10));
  for (let i = 0; i < than.length; i++) {
    const v = parts[i] ?? 0;
    if (v !== than[i]) return v < than[i]!;
  }
  return false;
}

/** How long start-up waits for NATS to check the prefix's owner; past that the check runs when NATS is back. */
const claimCheckAtStartMs = 5000;

/**
 * The worker role: the outbox relay and a delivery worker, sharing the stream set-up. Refuses to
 * start (StreamSetupRefused) when JETSTREAM_PREFIX belongs to another installation, or when
 * JETSTREAM_REPLICAS asks for replicas of a server that is not part of a cluster.
 */
export async function startWorkerRole(o: {
  config: Config;
  db: Database;
  databaseUrl: string;
  nats: Nats;
  secrets: SecretBox;
  logger: Logger;
  onAttempt?: WorkerOptions["onAttempt"];
  /** This process's writers wake its relay after their commit (outbox-wake.ts). */
  outboxWake?: OutboxWake;
}): Promise<{ prefix: string; stats: WorkerStats; stop(): Promise<void> }> {
  const { config, db, nats, logger } = o;
  const installation = await installationId(db.em.fork());
  const prefix = deliveryPrefix(config.jetstreamPrefix, installation);
  const names = streamNames(prefix);
  const schedule = retrySchedule(config.webhookRetryDelaysSeconds, config.webhookMaxAttempts);
  // The stream and consumer are set up once per connection, and again after a failure
  // (e.g. a NATS server that came back without its store).
  let ensured: { nc: NatsConnection; done: Promise<unknown> } | undefined;
  let started = false;
  let refusal: string | undefined;
  const streamReady = async (refresh = false) => {
    const nc = await nats.connected;
    if (refresh || ensured?.nc !== nc) {
      const version = nc.info?.version ?? "unknown";
      const done = ensureDeliveryStream(nc, names, schedule, { installation, prefix }, config.jetstreamReplicas, config.webhookMaxAckPending).then(({ changed }) => {
        const fields = { natsServer: version, prefix, stream: names.stream, replicas: config.jetstreamReplicas, ...(changed.length > 0 ? { changed } : {}) };
        if (!olderThan(version, pendingTimerFixed)) return logger.info(fields, "delivery stream ready");
        const note = `nats-server ${version} predates the fix for nats-server #6085: every retry re-arms the server's redelivery timer with a delayed NAK, and terminal outcomes send a bare term (done on every version); ${pendingTimerFixed.join(".")} or later is recommended (docs/operations.md)`;
        // Said once per installation and server version: at every start it was noise nobody could act on.
        // Not awaited: the stream is ready whatever the database answers, or however late.
        void recordOnce(db.em.fork(), "nats_server_6085_noted", version)
          .catch(() => true)
          .then((first) => {
            if (first) return logger.info(fields, note);
            logger.debug(fields, note);
            logger.info(fields, "delivery stream ready");
          });
      });
      ensured = { nc, done };
    }
    const attempt = ensured;
    await attempt.done.catch((err) => {
      if (ensured === attempt) ensured = undefined;
      // At start the refusal is the process's one line; later (NATS was away at start) it is logged.
      // Once, not on every retry of the relay and the worker.
      if (err instanceof StreamSetupRefused && started && err.message !== refusal) logger.error(err.message);
      if (err instanceof StreamSetupRefused) refusal = err.message;
      throw err;
    });
    refusal = undefined;
  };
  // Refuse at once when NATS answers and the set-up can never succeed (e.g. the prefix is another installation's).
  const check = streamReady();
  check.catch(() => undefined);
  const taken = await Promise.race([
    check.then(() => undefined, (err: unknown) => (err instanceof StreamSetupRefused ? err : undefined)),
    new Promise<undefined>((r) => setTimeout(() => r(undefined), claimCheckAtStartMs).unref()),
  ]);
  if (taken) throw taken;
  started = true;

  const relay = startRelay({ db, databaseUrl: o.databaseUrl, nats, names, logger, streamReady, laneShare: laneShare(config.webhookMainLanePerSecond), outboxWake: o.outboxWake });
  const worker = startDeliveryWorker({
    db,
    nats,
    names,
    schedule,
    secrets: o.secrets,
    connectTo: config.webhookConnectTo,
    timeoutMs: config.webhookTimeoutMs,
    concurrency: config.webhookConcurrency,
    fairness: {
      perEndpoint: config.webhookEndpointConcurrency,
      fastMs: config.webhookEndpointFastMs,
      circuitTimeouts: config.webhookCircuitTimeouts,
    },
    streamWaitMs: config.webhookStreamWaitSeconds * 1000,
    endpointStreamRetries: config.webhookEndpointStreamRetries,
    logger,
    streamReady,
    onAttempt: o.onAttempt,
  });
  return {
    prefix,
    stats: worker,
    async stop() {
      await worker.stop();
      await relay.stop();
    },
  };
}
