import { defineEntity, p, type InferEntity } from "@mikro-orm/core";

/**
 * The retention job's one row per installation: its lease (one run at a time across every
 * process on the database, taken over once it lapses, so a process killed mid-run does not stop
 * the job), and what its last successful run did, for readiness, metrics and `ops retention`.
 */
export const RetentionState = defineEntity({
  name: "RetentionState",
  tableName: "retention_state",
  properties: {
    id: p.string().length(32).primary(),
    holder: p.string().nullable(),
    leaseUntil: p.datetime().length(3).nullable(),
    lastStartedAt: p.datetime().length(3).nullable(),
    lastSuccessAt: p.datetime().length(3).nullable(),
    /** Rows the last successful run removed, by kind. */
    lastRemoved: p.json<Record<string, number>>().nullable(),
  },
});
export type RetentionState = InferEntity<typeof RetentionState>;
