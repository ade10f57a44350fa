import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  WebhookAttemptSchema,
  WebhookDeliverySchema,
  WebhookEndpointSchema,
  type WebhookDelivery,
  type WebhookEndpoint,
} from "../../gen/payments/v1/webhooks_pb.ts";
import type { AttemptRow, DeliveryRow } from "./deliveries.ts";

export interface EndpointRow {
  id: string;
  environment: string;
  url: string;
  description: string | null;
  status: string;
  createdAt: Date;
  disabledAt: Date | null;
  /** ["*"], or the event types it takes. */
  enabledEvents: string[];
}

/** An endpoint as the API shows it: never any secret material. */
export function endpointMessage(row: EndpointRow): WebhookEndpoint {
  return create(WebhookEndpointSchema, {
    id: row.id,
    url: row.url,
    description: row.description ?? undefined,
    status: row.status,
    environment: row.environment,
    createdAt: timestampFromDate(row.createdAt),
    disabledAt: row.disabledAt ? timestampFromDate(row.disabledAt) : undefined,
    enabledEvents: row.enabledEvents,
  });
}

const ts = (v: Date | string | null) => (v === null ? undefined : timestampFromDate(new Date(v)));

export function deliveryMessage(row: DeliveryRow, attempts: readonly AttemptRow[]): WebhookDelivery {
  return create(WebhookDeliverySchema, {
    id: row.id,
    eventId: row.event_id,
    eventType: row.event_type,
    endpointId: row.endpoint_id,
    status: row.status,
    attemptCount: row.attempt_count,
    nextAttemptAt: ts(row.next_attempt_at),
    lastAttemptAt: ts(row.last_attempt_at),
    lastStatusCode: row.last_status_code ?? undefined,
    lastError: row.last_error ?? undefined,
    replayOf: row.replay_of ?? undefined,
    cause: row.cause,
    createdAt: ts(row.created_at),
    attempts: attempts.map((a) =>
      create(WebhookAttemptSchema, {
        number: a.number,
        startedAt: ts(a.started_at),
        durationMs: a.duration_ms ?? 0,
        statusCode: a.status_code ?? undefined,
        error: a.error ?? undefined,
        outcome: a.outcome ?? "unknown",
        responseExcerpt: a.response_excerpt ?? undefined,
      }),
    ),
  });
}
