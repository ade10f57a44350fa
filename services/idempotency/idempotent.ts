import { fromBinary, toBinary, toJson, type DescMessage } from "@bufbuild/protobuf";
import type { UnaryRequest, UnaryResponse } from "@connectrpc/connect";
import { canonicalJson, sha256Hex } from "../platform/canonical-json.ts";
import type { EntityManager } from "../platform/db.ts";
import { apiError } from "../platform/errors.ts";
import type { Owner } from "../auth/keys.ts";
import { replayKey } from "../rpc/context.ts";

/** How long a key's result is kept for replay. */
export const retentionHours = 24;
/** How long a duplicate waits for the first request with its key before giving up with 409. */
const waitForFirstMs = 10_000;

type Next = (em: EntityManager) => Promise<UnaryResponse<DescMessage, DescMessage>>;

/**
 * Runs a request under an Idempotency-Key, in one transaction with its key row:
 * - a new key runs the request and stores its response with the key;
 * - the same request again replays the stored response (Idempotent-Replayed: true);
 * - another request under the key is refused with idempotency_conflict;
 * - a duplicate arriving while the first is running waits on the key's row lock and
 *   then replays, or gets idempotency_in_progress after waitForFirstMs;
 * - a request that fails rolls back, key included, so it can be retried.
 */
export async function runIdempotent(
  em: EntityManager,
  owner: Owner,
  key: string,
  req: UnaryRequest<DescMessage, DescMessage>,
  next: Next,
): Promise<UnaryResponse<DescMessage, DescMessage>> {
  const rpc = req.method.parent.typeName + "/" + req.method.name;
  const fingerprint = sha256Hex(canonicalJson(toJson(req.method.input, req.message, { useProtoFieldName: true })));
  const where = [owner.merchantId, owner.environment, key];
  try {
    return await em.transactional(async (em) => {
      // The lock timeout is set in the same statement (one round trip); it applies to
      // the wait on a concurrent request's key row, which happens after it is set.
      const inserted = await em.execute<{ key: string }[]>(
        `with timeout as (select set_config('lock_timeout', '${waitForFirstMs}ms', true))
         insert into idempotency_records (merchant_id, environment, key, rpc, fingerprint, response, created_at, expires_at)
         select ?, ?, ?, ?, ?, '\\x', now(), now() + interval '${retentionHours} hours' from timeout
         on conflict do nothing returning key`,
        [...where, rpc, fingerprint],
      );
      if (inserted.length === 0) {
        const [row] = await em.execute<{ rpc: string; fingerprint: string; response: Buffer }[]>(
          `select rpc, fingerprint, response from idempotency_records where merchant_id = ? and environment = ? and key = ?`,
          where,
        );
        if (!row) throw apiError("idempotency_in_progress", "A request with this Idempotency-Key is still being processed.");
        if (row.rpc !== rpc || row.fingerprint !== fingerprint) {
          throw apiError("idempotency_conflict", "This Idempotency-Key was already used with a different request.");
        }
        // The call still goes through the handler layer, so the protocol's own response
        // headers are kept; replayable() answers with the stored message instead of the handler.
        req.contextValues.set(replayKey, fromBinary(req.method.output, row.response));
        return next(em);
      }
      const res = await next(em);
      await em.execute(`update idempotency_records set response = ? where merchant_id = ? and environment = ? and key = ?`, [
        Buffer.from(toBinary(req.method.output, res.message)),
        ...where,
      ]);
      return res;
    });
  } catch (err) {
    if (isLockTimeout(err)) {
      throw apiError("idempotency_in_progress", "A request with this Idempotency-Key is still being processed.");
    }
    throw err;
  }
}

function isLockTimeout(err: unknown): boolean {
  const e = err as { code?: string; cause?: { code?: string } } | null;
  return e?.code === "55P03" || e?.cause?.code === "55P03";
}

/** Deletes results past their retention; the scheduler calls it. */
export async function purgeExpiredKeys(em: EntityManager): Promise<number> {
  const rows = await em.execute<{ key: string }[]>(`delete from idempotency_records where expires_at < now() returning key`);
  return rows.length;
}
