import { readFileSync } from "node:fs";
import http from "node:http";
import { join } from "node:path";
import type { Database } from "../platform/db.ts";
import type { Nats } from "../platform/nats.ts";
import type { Registry } from "prom-client";
import type { RetentionSettings } from "../platform/config.ts";
import { retentionLate, retentionStatus } from "../retention/job.ts";
import { daysCovered, listPartitions, minDaysAhead } from "../retention/partitions.ts";

/** The OpenAPI document of the REST API, as generated into gen/ (read once). */
const openapi = readFileSync(join(import.meta.dirname, "../../gen/openapi.json"));

/**
 * Health, readiness, Prometheus metrics and the OpenAPI document, apart from the merchant API so
 * that it has only the documented routes.
 */
export function createOpsServer(
  db: Database,
  nats: Nats,
  metrics?: Registry,
  retention?: Pick<RetentionSettings, "intervalSeconds">,
  /** What /readyz warns of about exchange rates (the rate engine of this process, if it reads them), or undefined. */
  ratesWarning?: () => string | undefined,
): http.Server {
  return http.createServer(async (req, res) => {
    const reply = (status: number, body: unknown) => {
      res.writeHead(status, { "Content-Type": "application/json" });
      res.end(JSON.stringify(body));
    };
    const path = (req.url ?? "/").split("?")[0];
    if (req.method !== "GET") return reply(405, { status: "method_not_allowed" });
    if (path === "/healthz") return reply(200, { status: "ok" });
    if (path === "/openapi.json") {
      res.writeHead(200, { "Content-Type": "application/json", "Content-Length": openapi.length, "Cache-Control": "no-cache" });
      return res.end(openapi);
    }
    if (path === "/metrics" && metrics) {
      // A gauge whose source is down is left out (and counted in payments_scrape_errors_total): the scrape itself answers.
      let text: string;
      try {
        text = await metrics.metrics();
      } catch {
        return reply(500, { status: "metrics_failed" });
      }
      res.writeHead(200, { "Content-Type": metrics.contentType, "Cache-Control": "no-store" });
      return res.end(text);
    }
    if (path === "/readyz") {
      const [database, broker] = await Promise.all([
        db.em
          .fork()
          .execute("select 1")
          .then(() => true)
          .catch(() => false),
        nats.ready(),
      ]);
      const ok = database && broker;
      // A warning, not a refusal: a late retention job costs disk, not answers (reads apply retention themselves).
      const warnings: string[] = [];
      let retentionView: { last_success_at: string | null } | undefined;
      if (database && retention) {
        const status = await retentionStatus(db.em.fork()).catch(() => undefined);
        if (status) {
          retentionView = { last_success_at: status.lastSuccessAt?.toISOString() ?? null };
          if (retentionLate(status, retention.intervalSeconds)) {
            warnings.push(
              status.lastSuccessAt
                ? `retention has not run since ${status.lastSuccessAt.toISOString()} (RETENTION_INTERVAL ${retention.intervalSeconds} s): is a scheduler role running?`
                : "retention has never run: is a scheduler role running?",
            );
          }
        }
      }
      if (database) {
        // Made a week ahead by every process: fewer days means none has run its keeper for days, and
        // inserts (events, deliveries, attempts) fail on the first day without one.
        const ahead = await listPartitions(db.em.fork()).then((p) => daysCovered(p, new Date()), () => undefined);
        if (ahead !== undefined && ahead < minDaysAhead) {
          warnings.push(`the webhook tables have partitions for ${Math.max(0, ahead).toFixed(1)} more days only (a week is kept ahead): is any process running? ops retention shows them`);
        }
      }
      // A warning too: only fiat-priced creates need rates, and they say why they are refused.
      const rates = ratesWarning?.();
      if (rates) warnings.push(rates);
      return reply(ok ? 200 : 503, { status: ok ? "ready" : "not_ready", database, nats: broker, ...(retentionView ? { retention: retentionView } : {}), warnings });
    }
    reply(404, { status: "not_found" });
  });
}
