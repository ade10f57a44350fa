import { fromBinary, toBinary, toJson, type DescMessage, type Message } from "@bufbuild/protobuf";
import type { UnaryRequest, UnaryResponse } from "@connectrpc/connect";
import { canonicalJson, sha256Hex } from "../platform/canonical-json.ts";
import type { EntityManager } from "../platform/db.ts";
import { apiError } from "../platform/errors.ts";
import type { Owner } from "../auth/keys.ts";
import { replayKey } from "./context-keys.ts";

/** IDEMPOTENCY_RETENTION's default: how long a key's result is kept for replay (as Stripe keeps keys). */
export const defaultRetentionSeconds = 86_400;
/** How long a duplicate waits for the first request with its key before giving up with 409. */
const waitForFirstMs = 10_000;

/**
 * The end of a key row's insert: a row of the key already there is taken over as new only when it
 * is past retention (one parameter: the retention in seconds), else left alone (no row returned).
 * A row whose request is still running is uncommitted: the insert waits for it (under the lock
 * timeout) and then sees the row that request committed, well within retention, so a running
 * request's key is never taken over; the retention job cannot see it at all.
 */
const takeOver = `on conflict (merchant_id, environment, key) do update
   set rpc = excluded.rpc, fingerprint = excluded.fingerprint, response = excluded.response,
       created_at = excluded.created_at
 where idempotency_records.created_at <= now() - make_interval(secs => ?)`;

type Next = (em: EntityManager) => Promise<UnaryResponse<DescMessage, DescMessage>>;

/**
 * Runs a request under an Idempotency-Key, in one transaction with its key row:
 * - a new key runs the request and stores its response with the key;
 * - the same request again replays the stored response (Idempotent-Replayed: true);
 * - another request under the key is refused with idempotency_conflict;
 * - a duplicate arriving while the first is running waits on the key's row lock and
 *   then replays, or gets idempotency_in_progress after waitForFirstMs;
 * - a request that fails rolls back, key included, so it can be retried;
 * - a key whose row is older than the claim's retention is absent: the request takes the row
 *   over as a new one (takeOver), whether or not the retention job has removed it yet.
 */
export async function runIdempotent(
  em: EntityManager,
  owner: Owner,
  key: string,
  req: UnaryRequest<DescMessage, DescMessage>,
  next: Next,
  claim: IdempotencyClaim = claimFor(owner, key, req),
): Promise<UnaryResponse<DescMessage, DescMessage>> {
  const { rpc, fingerprint } = claim;
  const where = [owner.merchantId, owner.environment, key];
  try {
    return await em.transactional(async (em) => {
      // The lock timeout is set in the same statement (one round trip); it applies to
      // the wait on a concurrent request's key row, which happens after it is set.
      const inserted = await em.execute<{ key: string }[]>(
        `with timeout as (select set_config('lock_timeout', '${waitForFirstMs}ms', true))
         insert into idempotency_records (merchant_id, environment, key, rpc, fingerprint, response, created_at)
         select ?, ?, ?, ?, ?, '\\x', now() from timeout
         ${takeOver} returning key`,
        [...where, rpc, fingerprint, claim.retentionSeconds],
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
    throw inProgressOnLockTimeout(err);
  }
}

/** A wait on a concurrent request's key row that timed out is idempotency_in_progress. */
export function inProgressOnLockTimeout(err: unknown): unknown {
  return isLockTimeout(err) ? apiError("idempotency_in_progress", "A request with this Idempotency-Key is still being processed.") : err;
}

/**
 * A request's claim on its Idempotency-Key, for a handler that writes everything in one
 * statement (claimCtes): the key row with the response, and its own rows only if the key was
 * new. `sent` is set once that statement went out: an error before it wrote nothing, and the
 * request can run again on the transactional path (runIdempotent), with its exact rules.
 */
export interface IdempotencyClaim {
  merchantId: string;
  environment: string;
  key: string;
  rpc: string;
  fingerprint: string;
  /** IDEMPOTENCY_RETENTION: a key's row older than this is absent. */
  retentionSeconds: number;
  sent: boolean;
  encode(message: Message): Uint8Array;
  decode(bytes: Uint8Array): Message;
}

export function claimFor(owner: Owner, key: string, req: UnaryRequest<DescMessage, DescMessage>, retentionSeconds = defaultRetentionSeconds): IdempotencyClaim {
  const output = req.method.output;
  return {
    merchantId: owner.merchantId,
    environment: owner.environment,
    key,
    rpc: req.method.parent.typeName + "/" + req.method.name,
    fingerprint: sha256Hex(canonicalJson(toJson(req.method.input, req.message, { useProtoFieldName: true }))),
    retentionSeconds,
    sent: false,
    encode: (message) => toBinary(output, message),
    decode: (bytes) => fromBinary(output, bytes),
  };
}

/** Thrown by a one-statement handler when the transactional path must decide (nothing was written). */
export class NeedsTransaction extends Error {
  override name = "NeedsTransaction";
}

/**
 * The key's part of a one-statement write, as CTEs: `claimed` (the key row with its response,
 * inserted only when `gate`'s `ok` is true and the key is new; the rest of the statement reads
 * from it) and `existing` (the key's committed row when it was not new). Same lock timeout as
 * runIdempotent for a concurrent request holding the key, unless `lockTimeoutMs` says otherwise.
 * `suffix` ends each CTE's name, so that several writes share a statement.
 */
export function claimCtes(claim: IdempotencyClaim, response: Uint8Array, gate: string, o: { suffix?: string; lockTimeoutMs?: number } = {}): { sql: string; params: unknown[] } {
  const s = o.suffix ?? "";
  return {
    sql: `timeout${s} as (select set_config('lock_timeout', '${o.lockTimeoutMs ?? waitForFirstMs}ms', true)),
     claimed${s} as (
       insert into idempotency_records (merchant_id, environment, key, rpc, fingerprint, response, created_at)
       select ?, ?, ?, ?, ?, ?, now() from timeout${s}, ${gate} where ${gate}.ok
       ${takeOver} returning key
     ),
     existing${s} as (
       select rpc, fingerprint, response from idempotency_records
        where merchant_id = ? and environment = ? and key = ? and not exists (select 1 from claimed${s})
          and created_at > now() - make_interval(secs => ?)
     )`,
    params: [
      ...[claim.merchantId, claim.environment, claim.key, claim.rpc, claim.fingerprint, Buffer.from(response)],
      claim.retentionSeconds,
      ...[claim.merchantId, claim.environment, claim.key, claim.retentionSeconds],
    ],
  };
}

/**
 * What a one-statement write that did not claim its key answers: the stored response (a
 * replay), idempotency_conflict, or, when the key's row is not visible to the statement
 * (committed while it waited), NeedsTransaction.
 */
export function settleExisting(claim: IdempotencyClaim, existing: { rpc: string | null; fingerprint: string | null; response: Buffer | null }): Message {
  if (existing.rpc === null || existing.response === null || existing.response.length === 0) throw new NeedsTransaction();
  if (existing.rpc !== claim.rpc || existing.fingerprint !== claim.fingerprint) {
    throw apiError("idempotency_conflict", "This Idempotency-Key was already used with a different request.");
  }
  return claim.decode(existing.response);
}

function isLockTimeout(err: unknown): boolean {
  const e = err as { code?: string; cause?: { code?: string } } | null;
  return e?.code === "55P03" || e?.cause?.code === "55P03";
}
