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
  /** The main lane: every delivery's message but a busy merchant's beyond its share (lanes.ts). */
  subject: string;
  consumer: string;
  /** The backlog lane: a merchant's messages beyond its share of the main lane, pulled by a consumer of their own. */
  backlogSubject: string;
  backlogConsumer: string;
  /** The stream holding the one message that says which installation the prefix belongs to. */
  claimStream: string;
  claimSubject: string;
}

export function streamNames(prefix: string): StreamNames {
  return {
    stream: `${prefix}-webhook-deliveries`,
    subject: `${prefix}.webhooks.delivery`,
    consumer: `${prefix}-webhook-worker`,
    backlogSubject: `${prefix}.webhooks.delivery.backlog`,
    backlogConsumer: `${prefix}-webhook-worker-backlog`,
    claimStream: `${prefix}-installation`,
    claimSubject: `${prefix}.installation`,
  };
}

/** The header naming a delivery message's endpoint (messages published before it existed have none). */
export const endpointHeader = "Endpoint-Id";
/**
 * The header naming a delivery message's event: a worker's claim reads the event's payload in the
 * same statement, in the partitions of the day its id names (webhook-deliveries.ts claimDeliveries).
 * A message without it (published before it existed) has its event read in a second statement.
 */
export const eventHeader = "Event-Id";
/**
 * A retry published from the outbox ahead of its time (webhook-deliveries.ts publishAheadMs) carries its due
 * time (epoch ms): a worker that gets it sooner sends it back to come at that time, before any
 * claim or slot is spent on it (worker.ts admit).
 */
export const dueHeader = "Due-At";

/**
 * JETSTREAM_PREFIX, or when it is unset one of the installation's own ("payments-<installation
 * id>"), so that two installations on one NATS never share a stream by default.
 */
export function deliveryPrefix(configured: string | undefined, installation: string): string {
  return configured ?? `payments-${installation}`;
}

/** The stream set-up cannot succeed as configured, however often it is tried: start refuses with the message. */
export class StreamSetupRefused extends Error {}

/** The prefix's streams belong to another installation (another database). */
export class PrefixTaken extends StreamSetupRefused {
  constructor(prefix: string) {
    super(
      `JETSTREAM_PREFIX "${prefix}" belongs to another installation (another database) on this NATS server; ` +
        `set JETSTREAM_PREFIX to a prefix of this installation's own, or leave it unset for one made from the installation id`,
    );
  }
}

/** JETSTREAM_REPLICAS above 1 against a server that is not part of a cluster. */
export class ReplicasUnsupported extends StreamSetupRefused {
  constructor(replicas: number, server: string) {
    super(
      `JETSTREAM_REPLICAS is ${replicas}, but the NATS server ${server} is not part of a cluster, where every stream has 1 replica; ` +
        `list a JetStream cluster's servers in NATS_URL, or set JETSTREAM_REPLICAS=1`,
    );
  }
}

/**
 * A clustered nats-server places each replica on a JetStream server of its own; with fewer servers up
 * than replicas it answers "no suitable peers for placement" (10005). A standalone one refuses
 * replicas on create (10074) but, 2.9 at least, records them on update without keeping them, so a
 * standalone server is refused before any request (ReplicasUnsupported).
 */
const noPlacement = 10005;

function explain(err: unknown, doing: string, replicas: number): Error {
  if (err instanceof JetStreamApiError && err.code === noPlacement) {
    return new Error(
      `${doing}: the cluster has fewer JetStream servers up than JETSTREAM_REPLICAS (${replicas}) asks for (${err.message}); ` +
        `retrying until enough are up (lower JETSTREAM_REPLICAS if the cluster is smaller)`,
      { cause: err },
    );
  }
  return new Error(`${doing}: ${(err as Error).message}`, { cause: err });
}

/**
 * Binds the prefix to this installation: the first installation to publish its id on the claim
 * subject owns it (the publish expects no earlier message); any other is refused. A worker of
 * another installation would take deliveries its database does not know, and they would be lost.
 */
async function claimPrefix(
  nc: NatsConnection,
  jsm: JetStreamManager,
  names: StreamNames,
  installation: string,
  prefix: string,
  replicas: number,
): Promise<string[]> {
  const changed = await ensureStream(
    jsm,
    {
      name: names.claimStream,
      description: "Which installation (database) owns this JETSTREAM_PREFIX: one message, its installation id.",
      subjects: [names.claimSubject],
      storage: StorageType.File,
      max_msgs_per_subject: 1,
      num_replicas: replicas,
    },
    replicas,
  );
  await jetstream(nc)
    .publish(names.claimSubject, installation, { expect: { lastSubjectSequence: 0 } })
    .catch((e: unknown) => {
      // Claimed already: by us or by another installation, as the message says.
      if (!(e instanceof JetStreamApiError && e.code === JetStreamApiCodes.StreamWrongLastSequence)) throw e;
    });
  const owner = await jsm.streams.getMessage(names.claimStream, { last_by_subj: names.claimSubject });
  if (owner?.string() !== installation) throw new PrefixTaken(prefix);
  return changed;
}

/**
 * How long JetStream remembers a Nats-Msg-Id. The relay publishes a delivery
 * again under the same id when its publish failed (it may have reached the
 * stream), and as it starts every delivery marked within this window and not
 * claimed, for those a relay that died between its mark and its publish left
 * out (relay.ts catchUp); a copy later than the window is caught by the worker
 * (webhook_deliveries.stream_seq).
 */
export const duplicateWindowMs = 10 * 60_000;

type WantedStream = Partial<StreamConfig> & { name: string };

function streamConfig(names: StreamNames, replicas: number): WantedStream {
  return {
    name: names.stream,
    description: "Webhook deliveries to attempt: one message per delivery (Nats-Msg-Id = delivery id), removed once acknowledged or terminated.",
    subjects: [names.subject, names.backlogSubject],
    retention: RetentionPolicy.Workqueue,
    storage: StorageType.File,
    duplicate_window: nanos(duplicateWindowMs),
    num_replicas: replicas,
  };
}

/** The two lanes' consumers: the same schedule, each its own subject (a work-queue stream's consumers may not overlap). */
function consumerConfigs(names: StreamNames, s: Schedule, maxAckPending: number): Partial<ConsumerConfig>[] {
  return [
    consumerConfig(names.consumer, names.subject, "Webhook delivery workers, main lane", s, maxAckPending),
    consumerConfig(names.backlogConsumer, names.backlogSubject, "Webhook delivery workers, backlog lane (a busy merchant's messages beyond its share)", s, maxAckPending),
  ];
}

function consumerConfig(name: string, subject: string, what: string, s: Schedule, maxAckPending: number): Partial<ConsumerConfig> {
  return {
    durable_name: name,
    description: `${what}: max_deliver = WEBHOOK_MAX_ATTEMPTS, backoff = WEBHOOK_RETRY_DELAYS (the retry schedule).`,
    filter_subject: subject,
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    max_deliver: s.maxAttempts,
    ...(s.backoffMs.length > 0 ? { backoff: s.backoffMs.map(nanos) } : { ack_wait: nanos(ackWaitWithoutBackoffMs) }),
    max_ack_pending: maxAckPending,
    // 0: as many as its stream, so JETSTREAM_REPLICAS scales both, and an existing consumer follows
    // its stream when that is scaled.
    num_replicas: 0,
  };
}

function isNotFound(err: unknown): boolean {
  return (
    err instanceof JetStreamApiError &&
    (err.code === JetStreamApiCodes.StreamNotFound || err.code === JetStreamApiCodes.ConsumerNotFound)
  );
}

/** What differs between a stream's config and the wanted one, as "field now → wanted". */
function differences(current: Partial<StreamConfig>, want: WantedStream): string[] {
  const out: string[] = [];
  for (const k of Object.keys(want) as (keyof WantedStream)[]) {
    const [now, wanted] = [JSON.stringify(current[k] ?? null), JSON.stringify(want[k] ?? null)];
    if (now !== wanted) out.push(`${k} ${now} → ${wanted}`);
  }
  return out;
}

/**
 * Creates the stream, or brings an existing one (e.g. one made with 1 replica) to the wanted config;
 * one that does not differ is left alone. Returns what changed, for the log.
 */
async function ensureStream(jsm: JetStreamManager, want: WantedStream, replicas: number): Promise<string[]> {
  let current: StreamConfig;
  try {
    current = (await jsm.streams.info(want.name)).config;
  } catch (err) {
    if (!isNotFound(err)) throw err;
    try {
      await jsm.streams.add(want);
      return [];
    } catch (addErr) {
      // Created meanwhile by another process: compare with that one.
      const made = await jsm.streams.info(want.name).catch(() => undefined);
      if (!made) throw explain(addErr, `could not create stream ${want.name}`, replicas);
      current = made.config;
    }
  }
  const changed = differences(current, want);
  if (changed.length === 0) return [];
  try {
    await jsm.streams.update(want.name, want);
  } catch (err) {
    throw explain(err, `could not update stream ${want.name} (${changed.join("; ")})`, replicas);
  }
  return changed.map((c) => `${want.name}: ${c}`);
}

/**
 * Claims the prefix for this installation, then creates the streams and the two lanes' durable
 * consumers (lanes.ts), or brings them to the configured schedule and replicas (JETSTREAM_REPLICAS). Returns what it changed
 * on existing ones, for the log.
 */
export async function ensureDeliveryStream(
  nc: NatsConnection,
  names: StreamNames,
  s: Schedule,
  owner: { installation: string; prefix: string },
  replicas: number,
  /**
   * WEBHOOK_MAX_ACK_PENDING. Unacknowledged messages count against it: attempts running, and
   * retries waiting in JetStream for their redelivery. Only retries due within
   * WEBHOOK_STREAM_WAIT_SECONDS wait there, at most WEBHOOK_ENDPOINT_STREAM_RETRIES of an endpoint
   * per worker (the rest wait in the outbox: dispatch.ts), so a failing endpoint's backlog cannot
   * fill it. JetStream's own default (1000) would be reached by a few busy endpoints' retries.
   */
  maxAckPending: number,
): Promise<{ jsm: JetStreamManager; changed: string[] }> {
  if (replicas > 1 && !nc.info?.cluster) {
    throw new ReplicasUnsupported(replicas, `${nc.getServer()} (nats-server ${nc.info?.version ?? "of unknown version"})`);
  }
  const jsm = await jetstreamManager(nc);
  const changed = await claimPrefix(nc, jsm, names, owner.installation, owner.prefix, replicas);
  changed.push(...(await ensureStream(jsm, streamConfig(names, replicas), replicas)));
  // The main lane's first: a consumer made before the lanes takes every subject, and the backlog
  // lane's could not be added beside it until it is narrowed to its own.
  for (const consumer of consumerConfigs(names, s, maxAckPending)) changed.push(...(await ensureConsumer(jsm, names.stream, consumer)));
  return { jsm, changed };
}

/** Creates a consumer, or brings an existing one to the wanted config; returns what changed. */
async function ensureConsumer(jsm: JetStreamManager, stream: string, consumer: Partial<ConsumerConfig>): Promise<string[]> {
  const name = consumer.durable_name!;
  try {
    const { config: current } = await jsm.consumers.info(stream, name);
    const { durable_name: _, deliver_policy: __, ack_policy: ___, ...updatable } = consumer;
    // Only a changed schedule is written: an update while messages are pending makes
    // some servers (2.9) hand pending messages out again.
    // A server may leave num_replicas out when it is 0 (as many as the stream).
    const now = { ...current, num_replicas: current.num_replicas ?? 0 };
    const differs = (Object.keys(updatable) as (keyof typeof updatable)[]).filter(
      (k) => JSON.stringify(now[k] ?? null) !== JSON.stringify(updatable[k] ?? null),
    );
    if (differs.length === 0) return [];
    await jsm.consumers.update(stream, name, updatable);
    return [`${name}: ${differs.join(", ")}`];
  } catch (err) {
    if (!isNotFound(err)) throw err;
    await jsm.consumers.add(stream, consumer);
    return [];
  }
}
