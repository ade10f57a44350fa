import { defineEntity, p, type InferEntity } from "@mikro-orm/core";

/**
 * The result of a request made with an Idempotency-Key, scoped by merchant
 * and environment. Written in the transaction of the request itself, so a
 * key is never recorded for work that did not happen.
 */
export const IdempotencyRecord = defineEntity({
  name: "IdempotencyRecord",
  tableName: "idempotency_records",
  properties: {
    merchantId: p.string().primary(),
    environment: p.string().length(4).primary(),
    key: p.string().length(128).primary(),
    rpc: p.string(),
    fingerprint: p.string().length(64),
    response: p.blob(),
    /** Past IDEMPOTENCY_RETENTION from it the key is absent (indexed for the retention job). */
    createdAt: p.datetime().length(3).index(),
    /**
     * No longer written or read: the retention is counted from created_at, so a changed
     * IDEMPOTENCY_RETENTION applies to every key. Nullable so that processes of the previous
     * version, which still write it, and this one run side by side during an upgrade; a later
     * migration drops it.
     */
    expiresAt: p.datetime().length(3).nullable(),
  },
});
export type IdempotencyRecord = InferEntity<typeof IdempotencyRecord>;
