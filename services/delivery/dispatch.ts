import type https from "node:https";
import type { JsMsg } from "@nats-io/jetstream";
import type { ConnectTo } from "../platform/connect-to.ts";
import type { Database } from "../platform/db.ts";
import { isDatabaseUnavailable } from "../platform/errors.ts";
import type { Logger } from "../platform/logger.ts";
import { SecretUnreadable, type SecretBox } from "../platform/secrets.ts";
import type { Batcher } from "./batcher.ts";
import { classify, type AttemptResult, type Outcome } from "./classify.ts";
import { storableText } from "./excerpt.ts";
import type { Ending } from "./fairness.ts";
import { eventHeader, type StreamNames } from "./jetstream.ts";
import { delayAfter, nakDelayFor, nakReaches, type Schedule } from "./schedule.ts";
import { send, type Response } from "./send.ts";
import type { SlotAnswer, SlotEnd, SlotRequest } from "./shared-gate.ts";
import { signatureHeaders, userAgent } from "./signature.ts";
import { PolicyRejection, UnresolvedHost, resolveTarget } from "./url-policy.ts";
import type { WaitingRetries } from "./waiting-retries.ts";
import {
  failClaimed,
  giveUpAttempt,
  recordLostAttempt,
  requeue,
  type AttemptRecord,
  type Claimed,
  type ClaimRequest,
  type ClaimResult,
  type HeldBackRequest,
} from "./webhook-deliveries.ts";

/**
 * One message's attempt, in named stages with typed values between them (as Svix's worker: prepare
 * → call → handle success or failure): claim (the delivery becomes this attempt's, or the message
 * is sent on its way: NAKed, terminated, put back in the outbox) → prepare (waits for its due time,
 * records a lost previous attempt, ends it when its endpoint was disabled) → call (the signed POST,
 * or none: given up at a stop, or too late after the claim) → finish (the outcome recorded) →
 * settle (the message acknowledged, terminated, NAKed to its retry or its retry sent to the
 * outbox). dispatchMessage runs them; the worker (worker.ts) decides when a message may start.
 */


/**
 * An attempt whose request has not gone out this long after its claim never sends it (a worker
 * that stalled, a database outage while it recorded a lost attempt, a slow DNS answer): it is
 * recorded as lost and retried on schedule. So an attempt is over, whatever became of its worker,
 * by its claim + this + the request's timeout. The worker counts it on its own monotonic clock
 * from just before it sent the claim (Claimed.claimSentAt), so however its wall clock is set, it
 * never sends later than this after the claim the database recorded.
 */
export const sendWithinMs = 5000;

/**
 * A request is over a moment after its timeout fires (later on a busy event loop). Not for
 * workers' clocks: the claim and the takeover are measured on the database's clock
 * (webhook-deliveries.ts claimDeliveries), and each worker's deadlines on its own monotonic clock.
 */
export const takeoverMarginMs = 2000;

/**
 * How long after its claim an attempt can no longer be running, so that another copy of its
 * message may take the delivery over (its worker died or stalled): a copy that comes sooner waits,
 * and the webhook is never POSTed twice at once. 17 s with the default 10 s timeout, by the
 * database's clock, whatever the workers' clocks say.
 */
export function takeoverAfter(timeoutMs: number): number {
  return sendWithinMs + timeoutMs + takeoverMarginMs;
}

/** The database writes an attempt makes, gathered across the worker's messages (batcher.ts). */
export interface Batches {
  claims: Batcher<ClaimRequest, ClaimResult>;
  finishes: Batcher<AttemptRecord, boolean>;
  heldBack: Batcher<HeldBackRequest, boolean>;
  slots: Batcher<SlotRequest, SlotAnswer>;
  slotEnds: Batcher<SlotEnd, boolean | undefined>;
}

/** What an attempt of the worker's needs of it. */
export interface DispatchContext {
  db: Database;
  names: StreamNames;
  schedule: Schedule;
  secrets: SecretBox;
  connectTo: readonly ConnectTo[];
  timeoutMs: number;
  logger: Logger;
  /** Told of each attempt whose outcome this worker recorded (metrics). */
  onAttempt?: (a: { number: number; startedAt: Date; result: AttemptResult; outcome: Outcome; eventCreatedAt: Date }) => void;
  batches: Batches;
  /** Runs a database write until it lands through an outage (worker.ts). */
  persist: <T>(write: () => Promise<T>) => Promise<T>;
  agent: https.Agent;
  /** Resolves when a stop gives up on the attempts still in flight. */
  givenUp: Promise<typeof gaveUp>;
  /** This worker's retries waiting in JetStream, per endpoint (capped). */
  waiting: WaitingRetries;
  /** A retry due later than this waits in the outbox. */
  streamWaitMs: number;
}

export const gaveUp = Symbol("gave up");
/** The attempt's request would have gone out later than sendWithinMs after its claim: it did not go out. */
const tooLate = Symbol("too late");

/** How an attempt that made a request ended, for its endpoint's share and circuit (fairness.ts). */
export interface Ended {
  ending: Ending;
  durationMs: number;
}

/** A claimed delivery about to be attempted: started at `startedAt`, `last` when no retry follows. */
interface Prepared {
  d: Claimed;
  startedAt: Date;
  last: boolean;
}

/** What came of the call: the receiver's answer (or the transport's error), or no request at all. */
type Called = { response: Response } | { none: typeof gaveUp | typeof tooLate };

/**
 * Handles one message; when it made an attempt, how that ended (for the endpoint's share and
 * circuit). `sending` is called as its request goes out; `sendBy` (performance.now()): the request
 * does not go out after this (its endpoint's shared slot would lapse before it could be over).
 */
export async function dispatchMessage(ctx: DispatchContext, msg: JsMsg, sending?: () => void, sendBy?: number): Promise<Ended | undefined> {
  // This delivery's ack deadline: backoff[n-1].
  const deadline = delayAfter(ctx.schedule, msg.info.deliveryCount);
  const heartbeat = setInterval(() => msg.working(), Math.max(25, Math.floor(deadline / 3)));
  try {
    const d = await claim(ctx, msg);
    if (!d) return undefined;
    const prepared = await prepare(ctx, msg, d);
    if (!prepared) return undefined;
    sending?.();
    const called = await call(ctx, prepared, sendBy);
    if ("none" in called) {
      await handleNoRequest(ctx, msg, prepared);
      return undefined;
    }
    const record = recordOf(ctx.schedule, prepared, called.response);
    let written: AttemptRecord | undefined;
    try {
      written = await finish(ctx, record);
    } catch {
      // Stopping while the database is away: the outcome is lost with this process, and the
      // next worker records the attempt as worker_lost. The message comes back after its deadline.
      return undefined;
    }
    clearInterval(heartbeat);
    const ended = { ending: endingOf(called.response), durationMs: record.durationMs };
    // Another worker took this delivery over (this one stalled past its deadline): the message is theirs.
    if (!written) return ended;
    ctx.onAttempt?.({ number: d.attempt, startedAt: prepared.startedAt, result: resultOf(called.response), outcome: written.outcome, eventCreatedAt: d.eventCreatedAt });
    await settle(ctx, msg, d.endpointId, written);
    return ended;
  } finally {
    clearInterval(heartbeat);
  }
}

/** Redelivered by the server `waitMs` from now (see nakDelayFor). */
function retryIn(schedule: Schedule, msg: JsMsg, waitMs: number): void {
  msg.nak(nakDelayFor(schedule, msg.info.deliveryCount, waitMs));
}

/**
 * The claim: the delivery, now this attempt's; or undefined when the message makes no attempt,
 * having been sent on its way here (NAKed to come back, terminated, or put back in the outbox).
 */
async function claim(ctx: DispatchContext, msg: JsMsg): Promise<Claimed | undefined> {
  const { schedule, logger } = ctx;
  const deliveryCount = msg.info.deliveryCount;
  let claimed: ClaimResult;
  try {
    claimed = await ctx.persist(() => ctx.batches.claims.add({ id: msg.string(), seq: msg.seq, eventId: msg.headers?.get(eventHeader) || undefined }));
  } catch (err) {
    // Stopping during an outage, or the database refused this claim: nothing was claimed, and
    // JetStream's delivery limit ends a message whose claim keeps being refused.
    if (!isDatabaseUnavailable(err)) logger.error({ err, delivery: msg.string(), seq: msg.seq }, "the database refused a delivery's claim");
    retryIn(schedule, msg, 1000);
    return undefined;
  }
  if ("claimed" in claimed) return claimed.claimed;
  switch (claimed.skipped) {
    case "in_flight":
      // A copy of the message whose attempt may be running here or elsewhere (its worker
      // stalled past the ack deadline): that attempt acknowledges the message; if it never
      // does (its worker died), the copy comes back once the delivery may be taken over. A
      // NAK on a later delivery may bring it back later than that, never sooner.
      logger.debug({ delivery: msg.string(), seq: msg.seq, retryInMs: claimed.retryInMs }, "a copy of a message whose attempt is in flight: not sent, back once that attempt is over");
      msg.nak(Math.max(1, nakDelayFor(schedule, deliveryCount, claimed.retryInMs)));
      return undefined;
    case "early":
      // Published again before its retry is due: wait for the schedule. A message on a later
      // JetStream delivery (held back before) cannot be NAKed for less than that delivery's
      // backoff entry: it is published again instead, as a new message that can.
      if (claimed.dueInMs <= ctx.streamWaitMs && nakReaches(schedule, deliveryCount, claimed.dueInMs)) retryIn(schedule, msg, claimed.dueInMs);
      else {
        msg.term();
        await ctx.persist(() => requeue(ctx.db.em.fork(), msg.string()));
      }
      return undefined;
    case "unknown":
      // Not this installation's delivery (its database has no such row): never end it here.
      logger.error({ delivery: msg.string(), seq: msg.seq, stream: ctx.names.stream }, "a delivery this database does not know: left for its owner");
      return undefined;
    default:
      // Finished already (e.g. its endpoint was disabled), or a second publish of the delivery.
      msg.term();
      return undefined;
  }
}

/**
 * Before the request: waits for the delivery's due time, records the attempt a stopped worker lost
 * (this claim took it over), and ends the delivery without a request when its endpoint was
 * disabled meanwhile (undefined then).
 */
async function prepare(ctx: DispatchContext, msg: JsMsg, d: Claimed): Promise<Prepared | undefined> {
  // Claimed a little before its time (a message published again comes when the outbox sends
  // it, not when the retry is due): the attempt waits for its time, never goes early.
  const earlyMs = (d.dueAt?.getTime() ?? 0) - Date.now();
  if (earlyMs > 0) await new Promise((resolve) => setTimeout(resolve, earlyMs));
  const startedAt = new Date();
  if (d.previousStatus === "processing" && d.attempt > 1) {
    await ctx.persist(() => recordLostAttempt(ctx.db.em.fork(), d.id, d.attempt - 1, d.previousAttemptAt ?? startedAt));
  }
  if (d.endpointStatus !== "enabled") {
    await ctx.persist(() => failClaimed(ctx.db.em.fork(), d.id, "endpoint_disabled"));
    msg.term();
    return undefined;
  }
  return { d, startedAt, last: d.attempt >= ctx.schedule.maxAttempts };
}

/** The request, raced with a stop's giving up. */
async function call(ctx: DispatchContext, p: Prepared, sendBy: number | undefined): Promise<Called> {
  const response = await Promise.race([attempt(ctx, p.d, sendBy), ctx.givenUp]);
  if (response === tooLate) {
    ctx.logger.warn({ delivery: p.d.id, attempt: p.d.attempt, sendWithinMs }, "an attempt not sent within its time after the claim is recorded as lost (another copy may take the delivery over)");
  }
  return response === gaveUp || response === tooLate ? { none: response } : { response };
}

/**
 * Stopping, and the attempt outlived the grace; or its request did not go out in time: recorded as
 * lost, and its delivery goes on without this message (back in the outbox, or failed when it was
 * the last attempt).
 */
async function handleNoRequest(ctx: DispatchContext, msg: JsMsg, p: Prepared): Promise<void> {
  const written = await giveUpAttempt(ctx.db.em.fork(), p.d.id, p.d.attempt, p.startedAt, p.last, delayAfter(ctx.schedule, p.d.attempt)).catch(() => false);
  // Not written (the database is away): JetStream hands the message out again after its
  // deadline, and the next claim records the attempt as worker_lost.
  if (written) msg.term();
}

function resultOf(response: Response): AttemptResult {
  return "statusCode" in response ? { statusCode: response.statusCode } : { error: response.error };
}

/** webhook_deliveries.last_error is a varchar(512). */
const lastErrorChars = 512;

/** The attempt's record and the delivery's state after it, from what the receiver answered. */
function recordOf(schedule: Schedule, p: Prepared, response: Response): AttemptRecord {
  const { d, startedAt, last } = p;
  const outcome = classify(resultOf(response));
  const status = outcome === "success" ? "delivered" : outcome === "retryable" && !last ? "pending" : "failed";
  const finishedAt = Date.now();
  // The schedule follows our own attempt count (a re-published message starts its count again).
  const waitMs = delayAfter(schedule, d.attempt);
  return {
    deliveryId: d.id,
    number: d.attempt,
    startedAt,
    durationMs: finishedAt - startedAt.getTime(),
    statusCode: "statusCode" in response ? response.statusCode : undefined,
    error: "error" in response ? response.error : undefined,
    outcome,
    excerpt: "statusCode" in response ? response.excerpt : undefined,
    status,
    nextAttemptAt: status === "pending" ? new Date(finishedAt + waitMs) : undefined,
    lastError:
      "statusCode" in response
        ? outcome === "success"
          ? undefined
          : `HTTP ${response.statusCode}`
        : storableText(`${response.error}: ${response.detail}`, lastErrorChars),
  };
}

/**
 * Records an attempt's outcome. When the database refuses the record itself (not an outage),
 * the attempt ends the delivery instead, recorded without what the receiver sent
 * (error "unrecorded", terminal): a record that cannot be written would otherwise hold its
 * message, and a slot of this worker, for ever. Through an outage it is retried until it lands,
 * however long: a last attempt the sweep meanwhile ended as abandoned (worker_lost) is then
 * recorded as it was answered (webhook-deliveries.ts finishAttempts: the finish wins).
 */
async function finish(ctx: DispatchContext, record: AttemptRecord): Promise<AttemptRecord | undefined> {
  try {
    return (await ctx.persist(() => ctx.batches.finishes.add(record))) ? record : undefined;
  } catch (err) {
    if (isDatabaseUnavailable(err)) throw err; // stopping during an outage
    ctx.logger.error({ err, delivery: record.deliveryId, attempt: record.number }, "the database refused a delivery attempt's record: the delivery ends failed (unrecorded)");
    const ended: AttemptRecord = { ...record, error: "unrecorded", outcome: "terminal", excerpt: undefined, status: "failed", nextAttemptAt: undefined, lastError: "unrecorded" };
    return (await ctx.persist(() => ctx.batches.finishes.add(ended))) ? ended : undefined;
  }
}

/**
 * The message after the recorded attempt: acknowledged when delivered, terminated when failed, and
 * for a retry either NAKed to come back when it is due or terminated with the delivery back in the
 * outbox.
 */
async function settle(ctx: DispatchContext, msg: JsMsg, endpointId: string, written: AttemptRecord): Promise<void> {
  const { schedule } = ctx;
  const deliveryCount = msg.info.deliveryCount;
  // The retry is due this long from now (its due time: the answer's time and the schedule's delay, recordOf).
  const dueInMs = Math.max(1, (written.nextAttemptAt?.getTime() ?? 0) - Date.now());
  if (written.status === "delivered") msg.ack();
  else if (written.status === "failed") msg.term();
  else if (deliveryCount < schedule.maxAttempts && dueInMs <= ctx.streamWaitMs && nakReaches(schedule, deliveryCount, dueInMs) && ctx.waiting.take(endpointId, dueInMs)) {
    retryIn(schedule, msg, dueInMs);
  } else {
    // The retry waits in the outbox, out of JetStream, and the relay publishes it when it is due
    // (webhook-deliveries.ts takeUnpublished), so it keeps the schedule: it is due later than
    // WEBHOOK_STREAM_WAIT_SECONDS (a message waiting in JetStream counts against the consumer's
    // max_ack_pending until it comes back: a failing endpoint's backlog would fill it and stop
    // every merchant's deliveries); or its endpoint already has its share of retries waiting in
    // JetStream from this worker (waiting-retries.ts); or JetStream has no delivery left for this
    // message (copies and takeovers spent some), or a NAK on this delivery cannot bring it back on
    // time (the message was held back for its endpoint's limit before this attempt, so it is on a
    // later delivery whose backoff entry is longer than the retry's delay).
    msg.term();
    await ctx.persist(() => requeue(ctx.db.em.fork(), written.deliveryId));
  }
}

function endingOf(r: Response): Ending {
  if ("statusCode" in r) return r.statusCode >= 200 && r.statusCode < 300 ? "success" : "answered";
  return r.error === "timeout" ? "timeout" : "other";
}

/** The security policy again (DNS may have changed since the endpoint was created), then the signed POST. */
async function attempt(ctx: DispatchContext, d: Claimed, sendBy = Infinity): Promise<Response | typeof tooLate> {
  let target;
  try {
    target = await resolveTarget(d.endpointUrl, ctx.connectTo);
  } catch (err) {
    if (err instanceof UnresolvedHost) return { error: "dns", detail: err.reason };
    if (err instanceof PolicyRejection) return { error: "security", detail: err.reason };
    throw err;
  }
  let current: string;
  let previous: string | undefined;
  try {
    current = ctx.secrets.open(d.endpointId, d.secretCiphertext);
    // A rotation's overlap: the previous secret signs too, until its expiry as of this attempt.
    const overlap = d.previousSecretCiphertext && d.previousSecretExpiresAt && d.previousSecretExpiresAt.getTime() > Date.now();
    previous = overlap ? ctx.secrets.open(d.endpointId, d.previousSecretCiphertext!) : undefined;
  } catch (err) {
    if (!(err instanceof SecretUnreadable)) throw err;
    ctx.logger.error({ delivery: d.id, endpoint: d.endpointId, reason: err.message }, "the endpoint's signing secret cannot be opened: the delivery ends failed (secret_unreadable)");
    return { error: "secret_unreadable", detail: err.message };
  }
  const body = Buffer.from(d.payload, "utf8");
  const timestamp = Math.floor(Date.now() / 1000);
  // Checked in the same turn as the request is made, so nothing runs between; on the monotonic
  // clock both deadlines were set on (a wall clock set back or forward moves neither).
  if (performance.now() > Math.min(d.claimSentAt + sendWithinMs, sendBy)) return tooLate;
  return send({
    url: new URL(d.endpointUrl),
    target,
    body,
    headers: {
      "content-type": "application/json",
      "user-agent": userAgent,
      "x-service-event-id": d.eventId,
      "x-service-timestamp": String(timestamp),
      ...signatureHeaders(current, previous, timestamp, body),
    },
    timeoutMs: ctx.timeoutMs,
    agent: ctx.agent,
  });
}
