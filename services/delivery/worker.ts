import { jetstream, jetstreamManager, type JsMsg } from "@nats-io/jetstream";
import type { Database } from "../platform/db.ts";
import type { Logger } from "../platform/logger.ts";
import type { Nats } from "../platform/nats.ts";
import type { SecretBox } from "../webhooks/secrets.ts";
import { Batcher } from "./batcher.ts";
import { classify, type AttemptResult } from "./classify.ts";
import type { StreamNames } from "./jetstream.ts";
import { delayAfter, type Schedule } from "./schedule.ts";
import { send, type Response } from "./send.ts";
import { signPayload } from "./signature.ts";
import { claimDeliveries, failAbandoned, failClaimed, finishAttempts, recordLostAttempt, type AttemptRecord, type Claimed, type ClaimRequest, type ClaimResult } from "./store.ts";
import { PolicyRejection, UnresolvedHost, resolveTarget, type ConnectTo } from "./url-policy.ts";

export interface WorkerOptions {
  db: Database;
  nats: Nats;
  names: StreamNames;
  schedule: Schedule;
  secrets: SecretBox;
  connectTo: readonly ConnectTo[];
  timeoutMs: number;
  concurrency: number;
  logger: Logger;
  /** Resolves once the stream and consumer exist on the current connection; `refresh` checks again. */
  streamReady: (refresh?: boolean) => Promise<void>;
}

export const userAgent = "PaymentIntentService-Webhooks/1.0";

/**
 * A delivery worker: pulls from the shared durable consumer and makes one
 * attempt per message. The retry schedule is JetStream's: success → ack;
 * retryable → left unacknowledged (working() restarts the backoff clock at the
 * attempt's end) so the server redelivers after backoff[n-1]; terminal or the
 * last attempt → term(). While an attempt runs, working() keeps its ack
 * deadline from passing, so it is never redelivered in flight; if this process
 * dies, the deadline passes and another worker takes the delivery over.
 */
export function startDeliveryWorker(o: WorkerOptions): { stop(): Promise<void> } {
  let stopped = false;
  let halt!: (err: Error) => void;
  // Rejects at stop(), so nothing waits for a NATS connection that never comes.
  const halted = new Promise<never>((_, reject) => (halt = reject));
  halted.catch(() => undefined);
  let current: { close(): Promise<void | Error> } | undefined;
  const inflight = new Set<Promise<void>>();
  // A worker that died is noticed no sooner than an ack deadline after its attempt began.
  // (Not the message's own count: a 2.9 server can hand a pending message out again as delivery 1.)
  const takeoverAfterMs = shortestDeadlineMs(o.schedule) / 2;
  const batches: Batches = {
    claims: new Batcher((items) => claimDeliveries(o.db.em.fork(), items, new Date(), takeoverAfterMs)),
    finishes: new Batcher((items) => finishAttempts(o.db.em.fork(), items)),
  };

  const loop = (async () => {
    let failed = false;
    while (!stopped) {
      try {
        const nc = await Promise.race([o.nats.connected, halted]);
        await o.streamReady(failed);
        failed = false;
        const consumer = await jetstream(nc).consumers.get(o.names.stream, o.names.consumer);
        // Pull only what can start now. A message waiting in a client-side buffer gets no
        // working(), so after its ack deadline JetStream would send it again.
        while (!stopped) {
          // Refill in batches (one pull request per batch, not per message).
          while (inflight.size > o.concurrency / 2) await Promise.race(inflight);
          const batch = await consumer.fetch({ max_messages: o.concurrency - inflight.size, expires: 5000 });
          current = batch;
          if (stopped) await batch.close();
          for await (const msg of batch) {
            const task = handle(o, batches, msg).catch((err) => o.logger.error({ err, seq: msg.seq }, "delivery attempt failed unexpectedly"));
            inflight.add(task);
            void task.finally(() => inflight.delete(task));
          }
          current = undefined;
        }
      } catch (err) {
        // E.g. the consumer went away (deleted, or the server lost it): set it up again.
        if (!stopped) o.logger.warn({ err }, "delivery worker: consumer unavailable; retrying");
        failed = true;
      }
      current = undefined;
      if (!stopped) await new Promise((r) => setTimeout(r, 1000));
    }
  })();

  // Deliveries whose worker died during their last attempt get no redelivery; end them.
  const sweep = setInterval(() => {
    void (async () => {
      const seqs = await failAbandoned(o.db.em.fork(), o.schedule.maxAttempts, o.timeoutMs + 60_000);
      if (seqs.length === 0) return;
      o.logger.warn({ deliveries: seqs.length }, "ended deliveries whose worker stopped during the last attempt");
      // Their messages reached max_deliver unacknowledged and would otherwise stay in the stream.
      const jsm = await jetstreamManager(await o.nats.connected);
      for (const seq of seqs) await jsm.streams.deleteMessage(o.names.stream, seq, false).catch(() => undefined);
    })().catch((err) => o.logger.warn({ err }, "abandoned-delivery sweep failed"));
  }, 30_000);
  sweep.unref();

  return {
    async stop() {
      stopped = true;
      halt(new Error("stopped"));
      clearInterval(sweep);
      await current?.close();
      await loop;
      // Attempts in flight finish and record their outcome.
      await Promise.allSettled(inflight);
    },
  };
}

interface Batches {
  claims: Batcher<ClaimRequest, ClaimResult>;
  finishes: Batcher<AttemptRecord, boolean>;
}

function shortestDeadlineMs(s: Schedule): number {
  return Math.min(...Array.from({ length: Math.max(1, s.backoffMs.length) }, (_, i) => delayAfter(s, i + 1)));
}

async function handle(o: WorkerOptions, batches: Batches, msg: JsMsg): Promise<void> {
  const deliveryCount = msg.info.deliveryCount;
  // Delivery n's ack deadline, and the delay before the next attempt: backoff[n-1].
  const deadline = delayAfter(o.schedule, deliveryCount);
  const heartbeat = setInterval(() => msg.working(), Math.max(25, Math.floor(deadline / 3)));
  try {
    const claim = await batches.claims.add({ id: msg.string(), seq: msg.seq });
    const startedAt = new Date();
    if ("skipped" in claim) {
      // A copy of the message whose attempt is running here or elsewhere: that attempt
      // acknowledges the message, and this copy leaves it alone.
      if (claim.skipped === "in_flight") return;
      // Finished already (e.g. its endpoint was disabled), or a second publish of the delivery.
      msg.term(claim.skipped);
      return;
    }
    const d = claim.claimed;
    if (d.previousStatus === "processing" && d.attempt > 1) {
      await recordLostAttempt(o.db.em.fork(), d.id, d.attempt - 1, d.previousAttemptAt ?? startedAt);
    }
    if (d.endpointStatus !== "enabled") {
      await failClaimed(o.db.em.fork(), d.id, "endpoint_disabled");
      msg.term("endpoint_disabled");
      return;
    }
    const response = await attempt(o, d);
    const result: AttemptResult = "statusCode" in response ? { statusCode: response.statusCode } : { error: response.error };
    const outcome = classify(result);
    const last = deliveryCount >= o.schedule.maxAttempts || d.attempt >= o.schedule.maxAttempts;
    const status = outcome === "success" ? "delivered" : outcome === "retryable" && !last ? "pending" : "failed";
    const finishedAt = Date.now();
    const owned = await batches.finishes.add({
      deliveryId: d.id,
      number: d.attempt,
      startedAt,
      durationMs: finishedAt - startedAt.getTime(),
      statusCode: "statusCode" in response ? response.statusCode : undefined,
      error: "error" in response ? response.error : undefined,
      outcome,
      excerpt: "statusCode" in response ? response.excerpt : undefined,
      status,
      nextAttemptAt: status === "pending" ? new Date(finishedAt + deadline) : undefined,
      lastError: "statusCode" in response ? (outcome === "success" ? undefined : `HTTP ${response.statusCode}`) : `${response.error}: ${response.detail}`,
    });
    clearInterval(heartbeat);
    // Another worker took this delivery over (this one stalled past its deadline): the message is theirs.
    if (!owned) return;
    if (status === "delivered") msg.ack();
    else if (status === "pending") msg.working();
    else msg.term(outcome);
  } finally {
    clearInterval(heartbeat);
  }
}

/** The security policy again (DNS may have changed since the endpoint was created), then the signed POST. */
async function attempt(o: WorkerOptions, d: Claimed): Promise<Response> {
  let target;
  try {
    target = await resolveTarget(d.endpointUrl, o.connectTo);
  } catch (err) {
    if (err instanceof UnresolvedHost) return { error: "dns", detail: err.reason };
    if (err instanceof PolicyRejection) return { error: "security", detail: err.reason };
    throw err;
  }
  const secret = o.secrets.open(d.endpointId, d.secretCiphertext);
  const body = Buffer.from(d.payload, "utf8");
  const timestamp = Math.floor(Date.now() / 1000);
  return send({
    url: new URL(d.endpointUrl),
    target,
    body,
    headers: {
      "content-type": "application/json",
      "user-agent": userAgent,
      "x-service-event-id": d.eventId,
      "x-service-timestamp": String(timestamp),
      "x-service-signature": signPayload(secret, timestamp, body),
    },
    timeoutMs: o.timeoutMs,
  });
}
