import type { Environment } from "../auth/keys.ts";
import type { EntityManager } from "../platform/db.ts";
import { apiError } from "../platform/errors.ts";
import { recordEvent } from "../events/record.ts";
import { insertReplays } from "./deliveries.ts";
import { failPendingOfEndpoint } from "../delivery/webhook-deliveries.ts";
import { forgetEndpoint } from "../delivery/shared-gate.ts";
import { defaultEventRetentionSeconds } from "../events/retention.ts";
import { generateSigningSecret, type SecretBox } from "../platform/secrets.ts";
import { checkEnabledCap } from "./store.ts";
import { deliveryTimeOf } from "../platform/time-partitions.ts";

/** Operator actions on any merchant's webhook endpoints (AdminService, the scheduler). */

export const overlapLimits = { default: 86_400, max: 7 * 86_400 } as const;

interface LockedEndpoint {
  id: string;
  status: string;
  secret_ciphertext: Buffer;
}

/** The endpoint, locked; one outside the credential's environment (when it has one) is not found, like another merchant's to an API key. */
async function lockEndpoint(em: EntityManager, id: string, environment: Environment | undefined): Promise<LockedEndpoint> {
  const [row] = await em.execute<LockedEndpoint[]>(`select id, status, secret_ciphertext from webhook_endpoints where id = ? and environment = coalesce(?, environment) for update`, [
    id,
    environment ?? null,
  ]);
  if (!row) throw apiError("not_found", `No webhook endpoint ${id}.`, "endpoint_id");
  return row;
}

export interface Rotation {
  signingSecret: string;
  previousSecretExpiresAt: Date | undefined;
}

/**
 * A new signing secret; the one it replaces keeps signing until `overlapSeconds` from now
 * (none for 0). A second rotation within an overlap drops the oldest secret: only the two
 * newest ever sign.
 */
export async function rotateSigningSecret(
  em: EntityManager,
  secrets: SecretBox,
  endpointId: string,
  overlapSeconds: number,
  environment: Environment | undefined,
  now = new Date(),
): Promise<Rotation> {
  const endpoint = await lockEndpoint(em, endpointId, environment);
  if (endpoint.status !== "enabled") {
    throw apiError("invalid_state", "The endpoint is disabled: its secret can no longer sign anything; create a new endpoint instead.", "endpoint_id");
  }
  const signingSecret = generateSigningSecret();
  const expiresAt = overlapSeconds > 0 ? new Date(now.getTime() + overlapSeconds * 1000) : undefined;
  await em.execute(
    `update webhook_endpoints set secret_ciphertext = ?, previous_secret_ciphertext = ?, previous_secret_expires_at = ? where id = ?`,
    [secrets.seal(endpointId, signingSecret), expiresAt ? endpoint.secret_ciphertext : null, expiresAt ?? null, endpointId],
  );
  return { signingSecret, previousSecretExpiresAt: expiresAt };
}

/**
 * Replays the endpoint's failed deliveries created at or after `since` that have no replay yet,
 * as the replay route does: a new pending delivery of the same event (the same bytes), replay_of
 * the failed one. Running it again replays only what failed since (replays that failed included).
 * The endpoint's row lock serialises concurrent recoveries, so none is replayed twice. A failed
 * delivery made since whose event is past EVENT_RETENTION (`retentionSeconds`, the configured one
 * from AdminService; the default's for a caller with no config) is not replayed (a replay of an old
 * event, made while it was within retention), as the replay route refuses it (insertReplays).
 */
export async function recoverFailedDeliveries(
  em: EntityManager,
  endpointId: string,
  since: Date,
  environment: Environment | undefined,
  now = new Date(),
  retentionSeconds = defaultEventRetentionSeconds,
): Promise<string[]> {
  const endpoint = await lockEndpoint(em, endpointId, environment);
  if (endpoint.status !== "enabled") throw apiError("invalid_state", "The endpoint is disabled: nothing can be delivered to it.", "endpoint_id");
  const failed = await em.execute<{ id: string }[]>(
    `select d.id from webhook_deliveries d
      where d.endpoint_id = ? and d.status = 'failed' and d.created_at >= ?
        and not exists (select 1 from webhook_deliveries r where r.endpoint_id = d.endpoint_id and r.created_at >= d.created_at and r.replay_of = d.id)
      order by d.created_at, d.id`,
    [endpointId, since],
  );
  return insertReplays(em, failed.map((f) => f.id), now, retentionSeconds);
}

interface FailingEndpoint {
  id: string;
  merchant_id: string;
  environment: "test" | "live";
  url: string;
  description: string | null;
  created_at: Date | string;
}

/**
 * Disables up to `limit` enabled endpoints where a failure ended a delivery (the delivery is
 * `failed` and its last real attempt failed) while the endpoint had been failing, with no success,
 * for at least `afterSeconds`: that failure came at least `afterSeconds` after the first failed
 * attempt since its last success (or since it was enabled again). An endpoint that failed once and
 * then had no traffic is left alone however old the failure (Svix's rule): only a new failure that
 * ends a delivery can disable it, and the scheduler acts on it at its next pass. Attempts a worker
 * lost are the service's failure, not the endpoint's, and do not count. Each gets last_error
 * "auto_disabled", its deliveries not yet attempted fail (endpoint_disabled) as on a merchant's
 * disable, and a webhook_endpoint.disabled event goes to the merchant's other enabled endpoints
 * of that environment, all in one transaction. Rows are taken with SKIP LOCKED, so several
 * schedulers share the work and never disable (or announce) one endpoint twice. Returns the
 * endpoints disabled.
 *
 * It runs every minute beside months of deliveries, so it reads none of an endpoint's history but
 * its failures (issue 50): the last success is the last attempt of the endpoint's newest delivered
 * delivery, found from the newest back; failures are read from the deliveries not delivered, by
 * status and updated_at (a delivery's updated_at is at or after its last attempt); and only the
 * last `afterSeconds` + `attemptSpanSeconds` are looked at (attemptSpanSeconds: how long after its
 * creation a delivery is still attempted), so failures older than that, with no success since, do
 * not count.
 */
export async function autoDisableFailing(em: EntityManager, afterSeconds: number, attemptSpanSeconds: number, limit = 100, now = new Date()): Promise<string[]> {
  const from = new Date(now.getTime() - (afterSeconds + attemptSpanSeconds) * 1000);
  return em.transactional(async (tx) => {
    const rows = await tx.execute<FailingEndpoint[]>(
      `with streak as (
         select e.id, e.merchant_id, e.environment, e.url, e.description, e.created_at,
                greatest(coalesce(e.enabled_at, '-infinity'), ?::timestamptz,
                         coalesce((select d.last_attempt_at from webhook_deliveries d
                                    where d.endpoint_id = e.id and d.status = 'delivered' and d.created_at >= ?::timestamptz
                                    order by d.created_at desc limit 1), '-infinity')) as since
           from webhook_endpoints e
          where e.status = 'enabled'
       ), failing as (
         select s.*, (select min(a.started_at) from webhook_deliveries d
                        join webhook_attempts a on a.delivery_id = d.id and a.delivery_time = ${deliveryTimeOf("d.id")}
                       where d.endpoint_id = s.id and d.status in ('pending', 'processing', 'failed') and d.updated_at > s.since
                         and a.outcome in ('retryable', 'terminal') and a.started_at > s.since) as first_failure
           from streak s
       )
       select f.id, f.merchant_id, f.environment, f.url, f.description, f.created_at from failing f
        where f.first_failure is not null
          and exists (select 1 from webhook_deliveries d
                       where d.endpoint_id = f.id and d.status = 'failed' and d.updated_at >= f.first_failure + make_interval(secs => ?)
                         and (select max(a.started_at) from webhook_attempts a
                               where a.delivery_id = d.id and a.delivery_time = ${deliveryTimeOf("d.id")} and a.outcome in ('retryable', 'terminal'))
                             >= f.first_failure + make_interval(secs => ?))
        order by f.id limit ?`,
      [from, from, afterSeconds, afterSeconds, limit],
    );
    // Locked one by one, skipping any another scheduler holds; still enabled once locked.
    const locked: FailingEndpoint[] = [];
    for (const e of rows) {
      const [row] = await tx.execute<{ id: string }[]>(`select id from webhook_endpoints where id = ? and status = 'enabled' for update skip locked`, [e.id]);
      if (row) locked.push(e);
    }
    for (const e of locked) {
      await tx.execute(`update webhook_endpoints set status = 'disabled', disabled_at = ?, last_error = 'auto_disabled' where id = ?`, [now, e.id]);
      await failPendingOfEndpoint(tx, e.id, now);
      await recordEvent(tx, {
        merchantId: e.merchant_id,
        environment: e.environment,
        type: "webhook_endpoint.disabled",
        data: {
          webhook_endpoint: {
            id: e.id,
            url: e.url,
            description: e.description,
            status: "disabled",
            environment: e.environment,
            created_at: new Date(e.created_at).toISOString(),
            disabled_at: now.toISOString(),
            last_error: "auto_disabled",
          },
        },
      });
    }
    return locked.map((r) => r.id);
  });
}

/**
 * Enables a disabled endpoint again (the admin CLI, AdminService.EnableWebhookEndpoint): the
 * merchant's cap of enabled endpoints holds, under the same lock as a create, and failures from
 * before count no more towards auto-disable. Deliveries that failed while it was disabled stay
 * failed: replay them, or recover them with AdminService.RecoverFailedDeliveries; the events it
 * got no delivery of while disabled come with a recovery (recovery.ts). Enabling an enabled endpoint
 * changes nothing. With `environment`, an endpoint of another environment is not found.
 */
export async function enableEndpoint(em: EntityManager, id: string, now = new Date(), environment?: Environment): Promise<{ id: string; status: string; enabled_at: string | null }> {
  return em.transactional(async (tx) => {
    const [row] = await tx.execute<{ merchant_id: string; environment: string; status: string; enabled_at: Date | null }[]>(
      `select merchant_id, environment, status, enabled_at from webhook_endpoints where id = ? and environment = coalesce(?, environment)`,
      [id, environment ?? null],
    );
    if (!row) throw apiError("not_found", `No webhook endpoint ${id}.`, "endpoint_id");
    if (row.status === "enabled") return { id, status: "enabled", enabled_at: row.enabled_at ? new Date(row.enabled_at).toISOString() : null };
    await checkEnabledCap(tx, row.merchant_id, row.environment);
    await tx.execute(`update webhook_endpoints set status = 'enabled', disabled_at = null, last_error = null, enabled_at = ? where id = ? and status = 'disabled'`, [now, id]);
    return { id, status: "enabled", enabled_at: now.toISOString() };
  });
}

/**
 * Deletes a disabled endpoint and its deliveries with their attempts, its circuit and its slots (the admin CLI), as deleting
 * an endpoint does at Stripe; the events stay, readable and replayable to other endpoints. An
 * enabled endpoint is refused: disabling first fails what it still had pending, so nothing is lost
 * in flight.
 */
export async function deleteEndpoint(em: EntityManager, id: string): Promise<{ id: string; deleted: true; deliveries_deleted: number }> {
  return em.transactional(async (tx) => {
    const [row] = await tx.execute<{ status: string }[]>(`select status from webhook_endpoints where id = ? for update`, [id]);
    if (!row) throw apiError("not_found", `No webhook endpoint ${id}.`, "endpoint_id");
    if (row.status !== "disabled") throw apiError("invalid_state", `Webhook endpoint ${id} is ${row.status}: disable it first.`, "endpoint_id");
    const [{ n } = { n: "0" }] = await tx.execute<{ n: string }[]>(`select count(*) as n from webhook_deliveries where endpoint_id = ?`, [id]);
    // Deliveries and attempts go with it (on delete cascade). Its circuit and slots are the
    // workers' plain-SQL tables, with no foreign key: they go here, or stay forever.
    await forgetEndpoint(tx, id);
    await tx.execute(`delete from webhook_endpoints where id = ?`, [id]);
    return { id, deleted: true, deliveries_deleted: Number(n) };
  });
}
