import type { NatsConnection } from "@nats-io/transport-node";
import type { Config } from "../platform/config.ts";
import type { Database } from "../platform/db.ts";
import type { Logger } from "../platform/logger.ts";
import type { Nats } from "../platform/nats.ts";
import type { SecretBox } from "../webhooks/secrets.ts";
import { ensureDeliveryStream, streamNames } from "./jetstream.ts";
import { startRelay } from "./relay.ts";
import { schedule as retrySchedule } from "./schedule.ts";
import { startDeliveryWorker } from "./worker.ts";

/** The worker role: the outbox relay and a delivery worker, sharing the stream set-up. */
export function startWorkerRole(o: {
  config: Config;
  db: Database;
  databaseUrl: string;
  nats: Nats;
  secrets: SecretBox;
  logger: Logger;
}): { stop(): Promise<void> } {
  const { config, db, nats, logger } = o;
  const names = streamNames(config.jetstreamPrefix);
  const schedule = retrySchedule(config.webhookRetryDelaysSeconds, config.webhookMaxAttempts);
  // The stream and consumer are set up once per connection, and again after a failure
  // (e.g. a NATS server that came back without its store).
  let ensured: { nc: NatsConnection; done: Promise<unknown> } | undefined;
  const streamReady = async (refresh = false) => {
    const nc = await nats.connected;
    if (refresh || ensured?.nc !== nc) ensured = { nc, done: ensureDeliveryStream(nc, names, schedule) };
    const attempt = ensured;
    await attempt.done.catch((err) => {
      if (ensured === attempt) ensured = undefined;
      throw err;
    });
  };
  const relay = startRelay({ db, databaseUrl: o.databaseUrl, nats, names, logger, streamReady });
  const worker = startDeliveryWorker({
    db,
    nats,
    names,
    schedule,
    secrets: o.secrets,
    connectTo: config.webhookConnectTo,
    timeoutMs: config.webhookTimeoutMs,
    concurrency: config.webhookConcurrency,
    logger,
    streamReady,
  });
  return {
    async stop() {
      await worker.stop();
      await relay.stop();
    },
  };
}
