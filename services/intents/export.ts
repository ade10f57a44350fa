import { stringify } from "csv-stringify/sync";
import type { Owner } from "../auth/keys.ts";
import type { EntityManager } from "../platform/db.ts";
import { oneSnapshot } from "../rpc/context.ts";
import { exportColumns, exportRows } from "./export-rows.ts";
import type { Intents } from "./intents.ts";
import type { TransactionsOf } from "./service.ts";
import { intentsAfter, type ListFilters } from "./store.ts";

/**
 * The bookkeeping export as CSV text, batch by batch: the intents are read in keyset batches
 * (newest first on (created_at, id), like the list; never an OFFSET, never all at once), each with
 * its transactions in one snapshot, and each batch becomes one chunk of whole lines. The caller
 * asks for the next chunk only once it has sent the last (the gateway waits for its client to
 * drain), so a million rows take the memory of one batch.
 */

/** Intents per batch: one statement for them and one for their transactions. */
export const exportBatchSize = 500;

export async function* exportCsv(em: EntityManager, intents: Intents, transactionsOf: TransactionsOf, owner: Owner, filters: ListFilters): AsyncGenerator<string> {
  const context = { graceMs: intents.quoting.graceSeconds * 1000 };
  // The header first, at once: the caller knows the export was accepted before any row is read.
  yield stringify([[...exportColumns]], { record_delimiter: "windows" });
  let after: { createdAt: Date; id: string } | undefined;
  for (;;) {
    const batch = await oneSnapshot(em, async (tx) => {
      const rows = await intentsAfter(tx, owner, filters, after, exportBatchSize);
      const seen = rows.filter((r) => r.amountReceived !== null).map((r) => r.id);
      const byIntent = seen.length === 0 ? new Map() : await transactionsOf(tx, seen);
      return rows.map((r) => (byIntent.has(r.id) ? { ...r, transactions: byIntent.get(r.id) } : r));
    });
    if (batch.length === 0) return;
    const records = batch.flatMap((row) => exportRows(row, { ...context, terms: intents.views.terms(row) }));
    yield stringify(records, { columns: [...exportColumns], record_delimiter: "windows" });
    if (batch.length < exportBatchSize) return;
    const last = batch[batch.length - 1]!;
    after = { createdAt: last.createdAt, id: last.id };
  }
}
