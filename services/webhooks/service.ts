import type { ServiceImpl } from "@connectrpc/connect";
import { allEvents, eventTypes, extensionEventTypes } from "../vocabulary/event-types.ts";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { recordedEvents } from "../events/stream.ts";
import { fromJson, getOption } from "@bufbuild/protobuf";
import { CreateWebhookEndpointRequestSchema, WebhookEventSchema, WebhookService } from "../../gen/payments/v1/webhooks_pb.ts";
import { field as fieldOption } from "../../gen/payments/v1/options_pb.ts";
import { findEventPayload, recordEvent } from "../events/record.ts";
import { replayPastRetention } from "../events/retention.ts";
import { attemptsOf, findDelivery, insertReplays, listDeliveries, type AttemptRow } from "./deliveries.ts";
import { failPendingOfEndpoint } from "../delivery/webhook-deliveries.ts";
import type { DeliveryStatus } from "../vocabulary/delivery-status.ts";
import { PolicyRejection, resolveTarget } from "../delivery/url-policy.ts";
import type { ConnectTo } from "../platform/connect-to.ts";
import { pageSizeOf } from "../intents/validate.ts";
import { canonicalJson } from "../platform/canonical-json.ts";
import type { CursorCodec } from "../platform/cursor.ts";
import type { EntityManager } from "../platform/db.ts";
import { apiError, validationError } from "../platform/errors.ts";
import { idTime, newId } from "../platform/ids.ts";
import type { Owner } from "../auth/keys.ts";
import { inTransaction, merchantRequest } from "../rpc/context.ts";
import { WebhookEndpointRecord } from "./entities.ts";
import { deliveryMessage, endpointMessage, type EndpointRow } from "./messages.ts";
import { checkEnabledCap, findEndpoint, listEndpoints, updateEndpoint } from "./store.ts";
import { generateSigningSecret, type SecretBox } from "../platform/secrets.ts";

export interface WebhookDeps {
  secrets: SecretBox;
  cursors: CursorCodec;
  connectTo: readonly ConnectTo[];
  /** EVENT_RETENTION, in seconds: older events are gone with all their deliveries, unless one has not ended, and are not replayed (events/retention.ts). */
  eventRetentionSeconds: number;
}

async function endpointOf(em: EntityManager, owner: Owner, id: string, lock = false): Promise<EndpointRow> {
  const row = await findEndpoint(em, owner, id, lock);
  if (!row) throw apiError("not_found", `No webhook endpoint ${id}.`, "endpoint_id");
  return row;
}

async function deliveryView(em: EntityManager, owner: Owner, id: string, retentionSeconds: number) {
  const row = await findDelivery(em, owner, id, retentionSeconds);
  if (!row) throw apiError("internal_error", "The delivery just created is missing.");
  return deliveryMessage(row, await attemptsOf(em, [id]));
}

/** The event types an endpoint is created with: the field rules checked each; none, or "*" among them, is every type. */
function enabledEventsOf(requested: readonly string[]): string[] {
  if (requested.length === 0 || requested.includes(allEvents)) return [allEvents];
  return [...new Set(requested)];
}

/** What a URL refused in Test adds: the url field's test_hint, as its field rules add it. */
const localHint = ` ${getOption(CreateWebhookEndpointRequestSchema.field.url, fieldOption).testHint}`;

/** Streams one merchant may hold open on one server at once. */
const maxStreamsPerMerchant = 10;

/** A stream's comma-separated types, each one an endpoint could take ("*" means no filter). */
function typesOf(given: string): string[] | undefined {
  if (given.length > 1024) throw validationError("types", `"types" is longer than 1024 characters.`);
  const types = [...new Set(given.split(",").map((t) => t.trim()))];
  if (types.includes(allEvents)) return undefined;
  const known: readonly string[] = [...eventTypes, ...extensionEventTypes];
  const unknown = types.find((t) => !known.includes(t));
  if (unknown !== undefined) throw validationError("types", `"types" names ${unknown === "" ? "an empty type" : `"${unknown}"`}, which is not an event type: use ${known.join(", ")}.`);
  return types;
}

export function webhookService(deps: WebhookDeps): ServiceImpl<typeof WebhookService> {
  const { secrets, cursors, connectTo, eventRetentionSeconds } = deps;
  const openStreams = new Map<string, number>();

  return {
    async createWebhookEndpoint(req, ctx) {
      const { principal, em } = merchantRequest(ctx);
      let url: string;
      try {
        await resolveTarget(req.url, connectTo);
        url = new URL(req.url).href;
      } catch (err) {
        if (err instanceof PolicyRejection) throw validationError("url", `The URL is not allowed: ${err.reason}.${principal.environment === "test" ? localHint : ""}`);
        throw err;
      }
      // Its length was checked as sent (the field rules); blank is no description.
      const description = req.description?.trim() || undefined;
      const signingSecret = generateSigningSecret();
      const row: EndpointRow = {
        id: newId("we"),
        environment: principal.environment,
        url,
        description: description ?? null,
        status: "enabled",
        createdAt: new Date(),
        disabledAt: null,
        enabledEvents: enabledEventsOf(req.enabledEvents),
      };
      await inTransaction(em, async (tx) => {
        await checkEnabledCap(tx, principal.merchantId, principal.environment);
        await tx.insert(WebhookEndpointRecord, {
          ...row,
          merchant: principal.merchantId,
          secretCiphertext: secrets.seal(row.id, signingSecret),
        });
      });
      const { $typeName: _, ...endpoint } = endpointMessage(row);
      return { data: { ...endpoint, signingSecret } };
    },

    async updateWebhookEndpoint(req, ctx) {
      const { principal, em } = merchantRequest(ctx);
      // Its length was checked as sent (the field rules); blank clears it.
      const description = req.description === undefined ? undefined : req.description.trim() || null;
      const enabledEvents = req.enabledEvents.length === 0 ? undefined : enabledEventsOf(req.enabledEvents);
      const row = await updateEndpoint(em, principal, req.endpointId, { description, enabledEvents });
      if (!row) throw apiError("not_found", `No webhook endpoint ${req.endpointId}.`, "endpoint_id");
      return { data: endpointMessage(row) };
    },

    async listWebhookEndpoints(req, ctx) {
      const { principal, em } = merchantRequest(ctx);
      const limit = pageSizeOf(req.limit);
      const binding = canonicalJson(["webhook-endpoints", principal.merchantId, principal.environment]);
      const page = await listEndpoints(em, cursors, principal, { cursor: req.cursor, limit, binding });
      return { data: page.rows.map(endpointMessage), hasMore: page.hasMore, nextCursor: page.nextCursor };
    },

    async getWebhookEndpoint(req, ctx) {
      const { principal, em } = merchantRequest(ctx);
      return { data: endpointMessage(await endpointOf(em, principal, req.endpointId)) };
    },

    async disableWebhookEndpoint(req, ctx) {
      const { principal, em } = merchantRequest(ctx);
      const row = await inTransaction(em, async (tx) => {
        const endpoint = await endpointOf(tx, principal, req.endpointId, true);
        if (endpoint.status === "disabled") return endpoint;
        const now = new Date();
        await tx.nativeUpdate(WebhookEndpointRecord, { id: endpoint.id }, { status: "disabled", disabledAt: now });
        await failPendingOfEndpoint(tx, endpoint.id, now);
        return { ...endpoint, status: "disabled", disabledAt: now };
      });
      return { data: endpointMessage(row) };
    },

    async testWebhookEndpoint(req, ctx) {
      const { principal, em } = merchantRequest(ctx);
      const deliveryId = await inTransaction(em, async (tx) => {
        const endpoint = await endpointOf(tx, principal, req.endpointId, true);
        if (endpoint.status !== "enabled") throw apiError("invalid_state", "The endpoint is disabled.", "endpoint_id");
        const event = await recordEvent(tx, {
          merchantId: principal.merchantId,
          environment: principal.environment,
          type: "webhook.test",
          data: { test: { synthetic: true, environment: principal.environment, endpoint_id: endpoint.id } },
          endpointId: endpoint.id,
        });
        return event.deliveryIds[0]!;
      });
      return { data: await deliveryView(em, principal, deliveryId, eventRetentionSeconds) };
    },

    async listWebhookDeliveries(req, ctx) {
      const { principal, em } = merchantRequest(ctx);
      const limit = pageSizeOf(req.limit);
      // One of the delivery statuses, or absent: its field rules (one_of) were checked before this handler.
      const query = { endpointId: req.endpointId, eventId: req.eventId, status: req.status as DeliveryStatus | undefined };
      const binding = canonicalJson(["webhook-deliveries", principal.merchantId, principal.environment, query]);
      const page = await listDeliveries(em, cursors, principal, query, { cursor: req.cursor, limit, binding }, eventRetentionSeconds);
      const attempts = await attemptsOf(em, page.rows.map((r) => r.id));
      const byDelivery = new Map<string, AttemptRow[]>();
      for (const a of attempts) byDelivery.set(a.delivery_id, [...(byDelivery.get(a.delivery_id) ?? []), a]);
      return { data: page.rows.map((r) => deliveryMessage(r, byDelivery.get(r.id) ?? [])), hasMore: page.hasMore, nextCursor: page.nextCursor };
    },

    async replayWebhookDelivery(req, ctx) {
      const { principal, em } = merchantRequest(ctx);
      const id = await inTransaction(em, async (tx) => {
        const original = await findDelivery(tx, principal, req.deliveryId, eventRetentionSeconds, true);
        if (!original) throw apiError("not_found", `No webhook delivery ${req.deliveryId}.`, "delivery_id");
        // Still readable past retention (a delivery of its event has not ended), but never replayed:
        // a replay would keep the event, and its day, for as long as replays went on.
        if (!original.event_within_retention) throw replayPastRetention(original.event_id);
        const endpoint = await endpointOf(tx, principal, original.endpoint_id, true);
        if (endpoint.status !== "enabled") throw apiError("invalid_state", "The delivery's endpoint is disabled.", "delivery_id");
        const [replay] = await insertReplays(tx, [original.id], new Date(), eventRetentionSeconds);
        // The event is locked (findDelivery): none comes back only when it passed retention since.
        if (replay === undefined) throw replayPastRetention(original.event_id);
        return replay;
      });
      return { data: await deliveryView(em, principal, id, eventRetentionSeconds) };
    },

    async *streamWebhookEvents(req, ctx) {
      const { principal, em } = merchantRequest(ctx);
      if (req.after !== undefined && !(req.after.length <= 64 && req.after.startsWith("evt_") && idTime(req.after))) {
        throw validationError("after", `"after" must be an event id (evt_...), the last one you received.`);
      }
      const types = req.types === undefined ? undefined : typesOf(req.types);
      const streams = openStreams.get(principal.merchantId) ?? 0;
      if (streams >= maxStreamsPerMerchant) {
        throw apiError("rate_limited", `This merchant already has ${maxStreamsPerMerchant} event streams open on this server; close one (stop a listen) first.`);
      }
      openStreams.set(principal.merchantId, streams + 1);
      try {
        // Accepted: a first (empty) message at once, so the caller knows before any event comes.
        yield {};
        for await (const event of recordedEvents(em, principal, { after: req.after, types, signal: ctx.signal })) {
          yield event === null ? {} : { event: { id: event.id, type: event.type, createdAt: timestampFromDate(event.createdAt), payload: event.payload } };
        }
      } finally {
        const left = (openStreams.get(principal.merchantId) ?? 1) - 1;
        if (left > 0) openStreams.set(principal.merchantId, left);
        else openStreams.delete(principal.merchantId);
      }
    },
    async getWebhookEvent(req, ctx) {
      const { principal, em } = merchantRequest(ctx);
      const event = await findEventPayload(em, principal, req.eventId, eventRetentionSeconds);
      if (!event) {
        throw apiError("not_found", `No webhook event ${req.eventId}.`, "event_id");
      }
      // The stored bytes are the envelope as delivered; the message carries the same JSON.
      return { data: fromJson(WebhookEventSchema, JSON.parse(event.payload)) };
    },
  };
}
