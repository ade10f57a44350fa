/**
 * When a payment seen in the bitcoin mempool leaves the service's view of it: only for a reason.
 *
 * - **Conflicted**: the watcher saw another transaction spend one of its inputs (in the mempool
 *   or in a block it read). That transaction can no longer be mined on this chain: withdrawn at
 *   once.
 * - **Absent**: missing from the mempool's reports, with no conflict seen. A node answers an empty
 *   or partial mempool for reasons that say nothing of the payment: restarted before mempool.dat
 *   was loaded (the watcher reports only a mempool the node says is loaded, so that one never
 *   counts), a failover or a load balancer's switch to a node the transaction has not reached
 *   yet. Withdrawn only once it was missing from `reads` consecutive reports spanning at least
 *   `seconds` (MEMPOOL_ABSENT_READS, MEMPOOL_ABSENT_SECONDS): evicted, expired, or gone from every
 *   node the watcher reads. A report that has it again starts the count over.
 */
export interface MempoolAbsenceRule {
  /** MEMPOOL_ABSENT_READS: consecutive reports an output must be missing from (1 or more). */
  reads: number;
  /** MEMPOOL_ABSENT_SECONDS: how long at least from the first report it was missing from. */
  seconds: number;
}

export const defaultMempoolAbsence: MempoolAbsenceRule = { reads: 3, seconds: 60 };

/** What is known of a live mempool output missing from the report being applied. */
export interface MissingOutput {
  /** Its transaction was reported conflicted. */
  conflicted: boolean;
  /** When it was first missing from a report (null: this report is the first). */
  absentSince: Date | null;
  /** Consecutive reports it was missing from before this one. */
  absentReads: number;
}

/** Whether the report being applied at `now` withdraws the output. */
export function withdrawsFromMempool(o: MissingOutput, now: Date, rule: MempoolAbsenceRule): boolean {
  if (o.conflicted) return true;
  const reads = o.absentReads + 1;
  const since = o.absentSince ?? now;
  return reads >= rule.reads && now.getTime() - since.getTime() >= rule.seconds * 1000;
}
