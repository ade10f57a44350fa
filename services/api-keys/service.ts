import type { ServiceImpl } from "@connectrpc/connect";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { ApiKeyService, type ApiKey } from "../../gen/payments/v1/api_keys_pb.ts";
import { findOwnedApiKey, issueApiKey, listOwnedApiKeys, revokeApiKeyRow, type ApiKeyRow } from "../auth/api-keys.ts";
import { isScope, type Scope } from "../auth/keys.ts";
import { pageSizeOf } from "../intents/validate.ts";
import { canonicalJson } from "../platform/canonical-json.ts";
import type { CursorCodec } from "../platform/cursor.ts";
import { apiError } from "../platform/errors.ts";
import { merchantRequest } from "../rpc/context.ts";

export interface ApiKeyDeps {
  cursors: CursorCodec;
  /** Returns once every process has dropped revoked keys from its credential cache (settleCredentialChanges). */
  settleCredentials?: () => Promise<unknown>;
}

const timestamp = (v: Date | string) => timestampFromDate(new Date(v));

/** A key as reads show it: its hint, never its secret or hash. */
function apiKeyMessage(row: ApiKeyRow): ApiKey {
  return {
    $typeName: "payments.v1.ApiKey",
    id: row.id,
    hint: row.hint,
    environment: row.environment,
    scopes: [...row.scopes].sort(),
    createdAt: timestamp(row.created_at),
    revokedAt: row.revoked_at === null ? undefined : timestamp(row.revoked_at),
    lastUsedAt: row.last_used_at === null ? undefined : timestamp(row.last_used_at),
  };
}

/**
 * ApiKeyService's handler: what the calling key is, and the merchant's keys of the caller's
 * environment (list, create, revoke), never a secret but the new key's, once.
 */
export function apiKeyService(deps: ApiKeyDeps): ServiceImpl<typeof ApiKeyService> {
  return {
    async getCurrentApiKey(_req, ctx) {
      const { principal } = merchantRequest(ctx);
      return { data: { id: principal.keyId, merchant: principal.merchantId, environment: principal.environment, scopes: [...principal.scopes].sort() } };
    },

    async listApiKeys(req, ctx) {
      const { principal, em } = merchantRequest(ctx);
      const binding = canonicalJson(["api-keys", principal.merchantId, principal.environment]);
      const page = await listOwnedApiKeys(em, deps.cursors, principal, { cursor: req.cursor, limit: pageSizeOf(req.limit), binding });
      return { data: page.rows.map(apiKeyMessage), hasMore: page.hasMore, nextCursor: page.nextCursor };
    },

    async getApiKey(req, ctx) {
      const { principal, em } = merchantRequest(ctx);
      const found = await findOwnedApiKey(em, principal, req.apiKeyId);
      if (!found) throw apiError("not_found", `No API key ${req.apiKeyId}.`, "api_key_id");
      return { data: apiKeyMessage(found) };
    },

    async createApiKey(req, ctx) {
      const { principal, em } = merchantRequest(ctx);
      // One or more known scopes already (the field's rules): what is left is whether the caller may give them.
      const scopes = [...new Set(req.scopes)].filter(isScope) as Scope[];
      // A key (or a session) never makes a key that can do more than it can itself.
      const lacking = scopes.filter((s) => !principal.scopes.has(s));
      if (lacking.length > 0) {
        throw apiError("insufficient_scope", `The caller lacks the scope ${lacking.join(", ")}, so it cannot give it to a new key: choose among the scopes it holds.`, "scopes");
      }
      const key = await issueApiKey(em, principal.merchantId, principal.environment, scopes);
      return {
        data: {
          id: key.id,
          hint: key.hint,
          environment: key.environment,
          scopes: [...key.scopes].sort(),
          createdAt: timestampFromDate(key.createdAt),
          apiKey: key.secret,
        },
      };
    },

    async revokeApiKey(req, ctx) {
      const { principal, em } = merchantRequest(ctx);
      const found = await findOwnedApiKey(em, principal, req.apiKeyId);
      // Another merchant's or environment's key is not found, as everywhere else.
      if (!found) throw apiError("not_found", `No API key ${req.apiKeyId}.`, "api_key_id");
      if (found.revoked_at !== null) return { data: apiKeyMessage(found) };
      // The key a call is made with (or the dashboard session's key) does not revoke itself: a slip
      // would lock its holder out mid-task. Another key, a link's session or the admin CLI can.
      if (found.id === principal.keyId) {
        throw apiError("invalid_state", "A key cannot revoke itself (nor a dashboard session the key it signed in with): revoke it with another key, or with the admin CLI.", "api_key_id");
      }
      const revokedAt = await revokeApiKeyRow(em, found.id);
      // Refused everywhere before this answers: no process still serves it from its cache.
      await deps.settleCredentials?.();
      return { data: apiKeyMessage({ ...found, revoked_at: revokedAt ?? new Date() }) };
    },
  };
}
