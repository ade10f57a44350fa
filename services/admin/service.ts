import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { InternalPrincipal } from "../auth/principal.ts";
import type { EntityManager } from "../platform/db.ts";
import { timestampDate, timestampFromDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import { fromJson } from "@bufbuild/protobuf";
import { AdminService, MerchantPolicySchema } from "../../gen/payments/v1/admin_pb.ts";
import type { Environment, Owner } from "../auth/keys.ts";
import { apiError, validationError } from "../platform/errors.ts";
import { anyAsset, applyAcceptedMethods, applyConfirmationRule, applyPriceSpread, applyTolerance, readPolicy } from "../policy/policy.ts";
import { inTransaction, internalRequest } from "../rpc/context.ts";
import type { SecretBox } from "../platform/secrets.ts";
import { enableEndpoint, overlapLimits, recoverFailedDeliveries, rotateSigningSecret } from "../webhooks/operations.ts";
import { startRecovery, type RecoveryBounds } from "../webhooks/recovery.ts";
import { retainedSince } from "../events/retention.ts";
import { createDashboardLink, dashboardLinkUrl } from "../dashboard/sessions.ts";

/**
 * An operator's call: an internal caller and the environment it acts in. A credential without
 * one (issued before roles and environments) is refused, whatever roles it holds: no call of
 * AdminService reaches another environment's merchants.
 */
function adminRequest(ctx: HandlerContext): { em: EntityManager; principal: InternalPrincipal; environment: Environment } {
  const { em, principal } = internalRequest(ctx);
  if (!principal.environment) {
    throw apiError("insufficient_scope", "This internal credential predates environments and holds no role: issue one for test or live (admin internal-credential create --environment).");
  }
  return { em, principal, environment: principal.environment };
}

/** A merchant's policy is per environment: the credential's. */
function ownerOf(merchantId: string, environment: Environment): Owner {
  return { merchantId, environment };
}

export interface AdminDeps {
  secrets: SecretBox;
  recoveryBounds: RecoveryBounds;
  /** DASHBOARD_BASE_URL: where a one-time link signs in. */
  dashboardBaseUrl: string;
  /** EVENT_RETENTION, in seconds: a recovery reaches back no further. */
  eventRetentionSeconds: number;
}

/** A time given to a recovery: valid, and not in the future. */
function pastTime(t: Timestamp, param: string, now: Date): Date {
  const at = timestampDate(t);
  if (Number.isNaN(at.getTime())) throw validationError(param, `"${param}" is not a valid time.`);
  if (at.getTime() > now.getTime()) throw validationError(param, `"${param}" must not be in the future.`);
  return at;
}

function endpointIdOf(id: string): string {
  if (id.trim() === "") throw validationError("endpoint_id", `"endpoint_id" is missing or empty.`);
  return id;
}

/** Operator actions on webhook endpoints; the route option takes internal credentials only (API keys get Unauthenticated). */
export function adminService(deps: AdminDeps): ServiceImpl<typeof AdminService> {
  return {
    async rotateSigningSecret(req, ctx) {
      const { em, environment } = adminRequest(ctx);
      const endpointId = endpointIdOf(req.endpointId);
      const overlap = req.overlapSeconds ?? overlapLimits.default;
      if (overlap > overlapLimits.max) {
        throw validationError("overlap_seconds", `"overlap_seconds" must be from 0 to ${overlapLimits.max} (7 days), got ${overlap}.`);
      }
      const rotation = await inTransaction(em, (tx) => rotateSigningSecret(tx, deps.secrets, endpointId, overlap, environment));
      return {
        endpointId,
        signingSecret: rotation.signingSecret,
        previousSecretExpiresAt: rotation.previousSecretExpiresAt ? timestampFromDate(rotation.previousSecretExpiresAt) : undefined,
      };
    },

    async setConfirmationPolicy(req, ctx) {
      const { em, environment } = adminRequest(ctx);
      const owner = ownerOf(req.merchant, environment);
      const input = {
        network: req.network,
        asset: req.asset ?? anyAsset,
        confirmations: req.confirmations,
        belowAmount: req.belowAmount,
        belowConfirmations: req.belowConfirmations,
        allowUnconfirmed: req.allowUnconfirmed,
        remove: req.remove,
      };
      return { policy: fromJson(MerchantPolicySchema, await inTransaction(em, (tx) => applyConfirmationRule(tx, owner, input))) };
    },

    async setUnderpaymentTolerance(req, ctx) {
      const { em, environment } = adminRequest(ctx);
      const owner = ownerOf(req.merchant, environment);
      return { policy: fromJson(MerchantPolicySchema, await inTransaction(em, (tx) => applyTolerance(tx, owner, req.underpaymentToleranceBps))) };
    },

    async setPriceSpread(req, ctx) {
      const { em, environment } = adminRequest(ctx);
      const owner = ownerOf(req.merchant, environment);
      return { policy: fromJson(MerchantPolicySchema, await inTransaction(em, (tx) => applyPriceSpread(tx, owner, req.priceSpreadBps))) };
    },

    async setAcceptedMethods(req, ctx) {
      const { em, environment } = adminRequest(ctx);
      const owner = ownerOf(req.merchant, environment);
      const methods = req.reset ? null : req.methods;
      return { policy: fromJson(MerchantPolicySchema, await inTransaction(em, (tx) => applyAcceptedMethods(tx, owner, methods))) };
    },

    async getMerchantPolicy(req, ctx) {
      const { em, environment } = adminRequest(ctx);
      const owner = ownerOf(req.merchant, environment);
      return { policy: fromJson(MerchantPolicySchema, await readPolicy(em, owner)) };
    },

    async recoverFailedDeliveries(req, ctx) {
      const { em, environment } = adminRequest(ctx);
      const endpointId = endpointIdOf(req.endpointId);
      if (!req.since) throw validationError("since", `"since" is required.`);
      const now = new Date();
      const since = retainedSince(pastTime(req.since, "since", now), deps.eventRetentionSeconds, now);
      const ids = await inTransaction(em, (tx) => recoverFailedDeliveries(tx, endpointId, since, environment, now, deps.eventRetentionSeconds));
      return { recovered: ids.length, deliveryIds: ids };
    },

    async createDashboardLink(req, ctx) {
      const { em, environment } = adminRequest(ctx);
      if (req.environment !== "" && req.environment !== environment) {
        throw apiError("validation_failed", `This internal credential acts in ${environment}, not ${req.environment}: use one issued for ${req.environment}.`, "environment");
      }
      const link = await createDashboardLink(em, { merchantId: req.merchant, environment, readOnly: req.readOnly, ttlSeconds: req.ttlSeconds, scopes: req.scopes });
      return { linkId: link.id, token: link.token, url: dashboardLinkUrl(deps.dashboardBaseUrl, link.token), expiresAt: timestampFromDate(link.expiresAt), scopes: link.scopes };
    },
    async enableWebhookEndpoint(req, ctx) {
      const { em, environment } = adminRequest(ctx);
      const endpointId = endpointIdOf(req.endpointId);
      const now = new Date();
      const since = req.recoverSince ? retainedSince(pastTime(req.recoverSince, "recover_since", now), deps.eventRetentionSeconds, now) : undefined;
      return inTransaction(em, async (tx) => {
        const enabled = await enableEndpoint(tx, endpointId, now, environment);
        const recovery = since ? await startRecovery(tx, endpointId, since, environment, { bounds: deps.recoveryBounds, force: req.force, now }) : undefined;
        return {
          endpointId,
          status: enabled.status,
          enabledAt: enabled.enabled_at ? timestampFromDate(new Date(enabled.enabled_at)) : undefined,
          recovered: recovery?.recovered ?? 0,
          enqueued: recovery?.enqueued ?? 0,
          recoveryId: recovery?.recoveryId,
          firstEventId: recovery?.firstEventId,
          lastEventId: recovery?.lastEventId,
        };
      });
    },
  };
}
