import type http from "node:http";
import type { CallOptions, Client } from "@connectrpc/connect";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { IntentService } from "../../gen/payments/v1/payment_intents_pb.ts";
import { commonHeaders } from "../checkout/handler.ts";
import { writeEach } from "../platform/response-stream.ts";
import type { PaymentFilters } from "./page.ts";

/**
 * The payments list's "Export CSV": the API's export (IntentService.ExportPaymentIntents, the
 * session's scopes and limits) with the list's filters, streamed to the browser as a download.
 */

/** The list's filters as the export's request: the dates as the list reads them ("from" that day on, "to" before that day). */
export function exportRequestOf(merchant: string, f: PaymentFilters) {
  return {
    merchant,
    status: f.status,
    merchantReference: f.reference,
    publicId: f.publicId,
    createdAfter: f.from ? timestampFromDate(new Date(Date.parse(`${f.from}T00:00:00Z`) - 1)) : undefined,
    createdBefore: f.to ? timestampFromDate(new Date(`${f.to}T00:00:00Z`)) : undefined,
  };
}

/**
 * Streams the export to `res`. The first chunk (the header line) is awaited before anything is
 * written, so a refusal (a scope the session lacks, a filter) throws and the caller shows its page;
 * later, the browser's pace sets the reading (each chunk waits for the last to drain), and a
 * failure aborts the download rather than end it as if whole.
 */
export async function sendExport(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  intents: Client<typeof IntentService>,
  request: ReturnType<typeof exportRequestOf>,
  options: CallOptions,
): Promise<void> {
  const abort = new AbortController();
  res.once("close", () => abort.abort());
  // A stream has no deadline: it lasts as long as the browser reads it.
  const chunks = intents.exportPaymentIntents(request, { ...options, timeoutMs: undefined, signal: abort.signal })[Symbol.asyncIterator]();
  const first = await chunks.next();
  res.writeHead(200, { ...commonHeaders, "Content-Type": "text/csv; charset=utf-8", "Content-Disposition": 'attachment; filename="payment-intents.csv"', "Cache-Control": "no-store" });
  if (req.method === "HEAD") {
    abort.abort();
    res.end();
    return;
  }
  try {
    await writeEach(res, first, chunks, (message) => message.chunk);
  } catch {
    res.destroy();
    return;
  }
  if (!res.destroyed) res.end();
}
