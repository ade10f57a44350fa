import {
  AckPolicy,
  jetstream,
  DeliverPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  RetentionPolicy,
  StorageType,
  jetstreamManager,
  type ConsumerConfig,
  type JetStreamManager,
  type StreamConfig,
} from "@nats-io/jetstream";
import { nanos, type NatsConnection } from "@nats-io/transport-node";
import type { Schedule } from "./schedule.ts";
import { ackWaitWithoutBackoffMs } from "./schedule.ts";

/** Every JetStream name derives from JETSTREAM_PREFIX, so instances and test runs share one NATS. */
export interface StreamNames {
  stream: string;
  subject: string;
  consumer: string;
  /** The stream holding the one message that says which installation the prefix belongs to. */
  claimStream: string;
  claimSubject: string;
}

export function streamNames(prefix: string): StreamNames {
  return {
    stream: `${prefix}-webhook-deliveries`,
    subject: `${prefix}.webhooks.delivery`,
    consumer: `${prefix}-webhook-worker`,
    claimStream: `${prefix}-installation`,
    claimSubject: `${prefix}.installation`,
  };
}

/**
 * JETSTREAM_PREFIX, or when it is unset one of the installation's own ("payments-<installation
 * id>"), so that two installations on one NATS never share a stream by default.
 */
export function deliveryPrefix(configured: string | undefined, installation: string): string {
  return configured ?? `payments-${installation}`;
}

/** The prefix's streams belong to another installation (another database). */
export class PrefixTaken extends Error {
  constructor(prefix: string) {
    super(
      `JETSTREAM_PREFIX "${prefix}" belongs to another installation (another database) on this NATS server; ` +
        `set JETSTREAM_PREFIX to a prefix of this installation's own, or leave it unset for one made from the installation id`,
    );
  }
}

/**
 * Binds the prefix to this installation: the first installation to publish its id on the claim
 * subject owns it (the publish expects no earlier message); any other is refused. A worker of
 * another installation would take deliveries its database does not know, and they would be lost.
 */
async function claimPrefix(nc: NatsConnection, jsm: JetStreamManager, names: StreamNames, installation: string, prefix: string): Promise<void> {
  try {
    await jsm.streams.info(names.claimStream);
  } catch (err) {
    if (!isNotFound(err)) throw err;
    const add = jsm.streams.add({
      name: names.claimStream,
      description: "Which installation (database) owns this JETSTREAM_PREFIX: one message, its installation id.",
      subjects: [names.claimSubject],
      storage: StorageType.File,
      max_msgs_per_subject: 1,
    });
    // Created meanwhile by another process: fine.
    await add.catch((e: unknown) => jsm.streams.info(names.claimStream).catch(() => Promise.reject(e)));
  }
  await jetstream(nc)
    .publish(names.claimSubject, installation, { expect: { lastSubjectSequence: 0 } })
    .catch((e: unknown) => {
      // Claimed already: by us or by another installation, as the message says.
      if (!(e instanceof JetStreamApiError && e.code === JetStreamApiCodes.StreamWrongLastSequence)) throw e;
    });
  const owner = await jsm.streams.getMessage(names.claimStream, { last_by_subj: names.claimSubject });
  if (owner?.string() !== installation) throw new PrefixTaken(prefix);
}

/**
 * How long JetStream remembers a Nats-Msg-Id. The relay marks a delivery
 * published right after the PubAck, so a second publish of the same delivery
 * happens only after a crash between the two; a copy later than this window is
 * caught by the worker (webhook_deliveries.stream_seq).
 */
export const duplicateWindowMs = 10 * 60_000;

/**
 * Unacknowledged messages count against max_ack_pending, and a message waiting
 * for its backoff redelivery is unacknowledged for up to 12 h. The default
 * (1000) would let one endpoint that is down stall every merchant's deliveries.
 */
export const maxAckPending = 100_000;

function streamConfig(names: StreamNames): Partial<StreamConfig> & { name: string } {
  return {
    name: names.stream,
    description: "Webhook deliveries to attempt: one message per delivery (Nats-Msg-Id = delivery id), removed once acknowledged or terminated.",
    subjects: [names.subject],
    retention: RetentionPolicy.Workqueue,
    storage: StorageType.File,
    duplicate_window: nanos(duplicateWindowMs),
  };
}

function consumerConfig(names: StreamNames, s: Schedule): Partial<ConsumerConfig> {
  return {
    durable_name: names.consumer,
    description: "Webhook delivery workers: max_deliver = WEBHOOK_MAX_ATTEMPTS, backoff = WEBHOOK_RETRY_DELAYS (the retry schedule).",
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    max_deliver: s.maxAttempts,
    ...(s.backoffMs.length > 0 ? { backoff: s.backoffMs.map(nanos) } : { ack_wait: nanos(ackWaitWithoutBackoffMs) }),
    max_ack_pending: maxAckPending,
  };
}

function isNotFound(err: unknown): boolean {
  return (
    err instanceof JetStreamApiError &&
    (err.code === JetStreamApiCodes.StreamNotFound || err.code === JetStreamApiCodes.ConsumerNotFound)
  );
}

/**
 * Claims the prefix for this installation, then creates the stream and the durable consumer, or
 * brings them to the configured schedule.
 */
export async function ensureDeliveryStream(
  nc: NatsConnection,
  names: StreamNames,
  s: Schedule,
  owner: { installation: string; prefix: string },
): Promise<JetStreamManager> {
  const jsm = await jetstreamManager(nc);
  await claimPrefix(nc, jsm, names, owner.installation, owner.prefix);
  const stream = streamConfig(names);
  try {
    await jsm.streams.info(names.stream);
    await jsm.streams.update(names.stream, stream);
  } catch (err) {
    if (!isNotFound(err)) throw err;
    await jsm.streams.add(stream);
  }
  const consumer = consumerConfig(names, s);
  try {
    const { config: current } = await jsm.consumers.info(names.stream, names.consumer);
    const { durable_name: _, deliver_policy: __, ack_policy: ___, ...updatable } = consumer;
    // Only a changed schedule is written: an update while messages are pending makes
    // some servers (2.9) hand pending messages out again.
    const changed = (Object.keys(updatable) as (keyof typeof updatable)[]).some(
      (k) => JSON.stringify(current[k] ?? null) !== JSON.stringify(updatable[k] ?? null),
    );
    if (changed) await jsm.consumers.update(names.stream, names.consumer, updatable);
  } catch (err) {
    if (!isNotFound(err)) throw err;
    await jsm.consumers.add(names.stream, consumer);
  }
  return jsm;
}
