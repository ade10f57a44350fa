import { defineEntity, p, type InferEntity } from "@mikro-orm/core";
import { Merchant } from "../auth/entities.ts";
import { WebhookEventRecord } from "../events/entities.ts";
import { WebhookEndpointRecord } from "./entities.ts";

/**
 * One attempt chain of one event to one endpoint; also the outbox row the
 * relay publishes to JetStream (published_at null = not yet taken by a relay;
 * set = taken, its publish done or under way).
 * stream_seq is the JetStream message that owns the delivery: a copy of the
 * message published again later is recognised and dropped.
 */
export const WebhookDeliveryRecord = defineEntity({
  name: "WebhookDeliveryRecord",
  tableName: "webhook_deliveries",
  properties: {
    id: p.string().primary(),
    merchant: () => p.manyToOne(Merchant).deleteRule("cascade"),
    environment: p.string().length(4),
    event: () => p.manyToOne(WebhookEventRecord).deleteRule("cascade"),
    endpoint: () => p.manyToOne(WebhookEndpointRecord).deleteRule("cascade"),
    status: p.string().length(16),
    attemptCount: p.integer().default(0),
    nextAttemptAt: p.datetime().length(3).nullable(),
    lastAttemptAt: p.datetime().length(3).nullable(),
    lastStatusCode: p.integer().nullable(),
    lastError: p.string().length(512).nullable(),
    replayOf: p.string().nullable(),
    /** Why it was made: event, replay or recovery (vocabulary/delivery-status.ts deliveryCauses). */
    cause: p.string().length(16).default("event"),
    publishedAt: p.datetime().length(3).nullable(),
    /** How often the delivery went back to the outbox (requeue); part of its Nats-Msg-Id. */
    republished: p.integer().default(0),
    streamSeq: p.bigint("number").nullable(),
    createdAt: p.datetime().length(3),
    updatedAt: p.datetime().length(3),
  },
  indexes: [
    { properties: ["merchant", "environment", "createdAt", "id"] },
    { properties: ["endpoint", "createdAt", "id"] },
    { properties: ["event", "createdAt", "id"] },
    { properties: ["status", "updatedAt"] },
    {
      name: "webhook_deliveries_unpublished_index",
      expression: `create index "webhook_deliveries_unpublished_index" on "webhook_deliveries" ("created_at") where "published_at" is null`,
    },
    // The relay's two reads (delivery/webhook-deliveries.ts takeUnpublished): retries waiting in the outbox by due time, new deliveries by age.
    {
      name: "webhook_deliveries_waiting_retry_index",
      expression: `create index "webhook_deliveries_waiting_retry_index" on "webhook_deliveries" ("next_attempt_at") where "published_at" is null and "next_attempt_at" is not null`,
    },
    {
      name: "webhook_deliveries_unpublished_new_index",
      expression: `create index "webhook_deliveries_unpublished_new_index" on "webhook_deliveries" ("created_at") where "published_at" is null and "next_attempt_at" is null`,
    },
  ],
  // Wakes the outbox relay when deliveries commit (NOTIFY is delivered at commit, once per
  // transaction for equal payloads). Per row, so a statement that inserts none stays silent; and
  // silent in a transaction whose writer wakes a relay of its own process after the commit
  // (delivery/outbox-wake.ts: a NOTIFY serialises commits).
  triggers: [
    {
      name: "webhook_deliveries_outbox_notify",
      timing: "after",
      events: ["insert"],
      forEach: "row",
      body: "if current_setting('webhook.outbox_wake', true) is distinct from 'caller' then perform pg_notify('webhook_outbox', ''); end if; return null;",
    },
  ],
});
export type WebhookDeliveryRecord = InferEntity<typeof WebhookDeliveryRecord>;

/** One HTTP attempt of a delivery; outcome null while it is in flight. */
export const WebhookAttemptRecord = defineEntity({
  name: "WebhookAttemptRecord",
  tableName: "webhook_attempts",
  properties: {
    delivery: () => p.manyToOne(WebhookDeliveryRecord).primary().deleteRule("cascade"),
    number: p.integer().primary(),
    startedAt: p.datetime().length(3),
    durationMs: p.integer().nullable(),
    statusCode: p.integer().nullable(),
    error: p.string().length(512).nullable(),
    outcome: p.string().length(16).nullable(),
    responseExcerpt: p.text().nullable(),
  },
});
export type WebhookAttemptRecord = InferEntity<typeof WebhookAttemptRecord>;

/**
 * An endpoint's recovery of the events it missed (AdminService.EnableWebhookEndpoint with
 * recover_since), enqueued a page at a time: the events recorded from `since` to `until` (when it
 * was asked for) that the endpoint takes, in event order, after the cursor (the last event given
 * a delivery). The scheduler adds the next page once the endpoint has taken most of the last one,
 * so a recovery never puts more than about a page ahead of other endpoints' deliveries. At most
 * one runs per endpoint.
 */
export const WebhookRecoveryRecord = defineEntity({
  name: "WebhookRecoveryRecord",
  tableName: "webhook_recoveries",
  properties: {
    id: p.string().primary(),
    endpoint: () => p.manyToOne(WebhookEndpointRecord).deleteRule("cascade"),
    since: p.datetime().length(3),
    until: p.datetime().length(3),
    cursorCreatedAt: p.datetime().length(3).nullable(),
    cursorEventId: p.string().nullable(),
    pageSize: p.integer(),
    /** The events it was to deliver, counted when it was asked for. */
    events: p.integer(),
    enqueued: p.integer().default(0),
    /** running, done, or stopped (its endpoint was disabled). */
    status: p.string().length(16),
    /** When its last page was enqueued: that page's deliveries were created from then on. */
    pageAt: p.datetime().length(3),
    createdAt: p.datetime().length(3),
    updatedAt: p.datetime().length(3),
  },
  indexes: [
    {
      name: "webhook_recoveries_running_index",
      expression: `create unique index "webhook_recoveries_running_index" on "webhook_recoveries" ("endpoint_id") where "status" = 'running'`,
    },
  ],
});
export type WebhookRecoveryRecord = InferEntity<typeof WebhookRecoveryRecord>;
