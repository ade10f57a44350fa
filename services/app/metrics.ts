import { jetstreamManager } from "@nats-io/jetstream";
import type { Interceptor } from "@connectrpc/connect";
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { AttemptResult, Outcome } from "../delivery/classify.ts";
import { streamNames } from "../delivery/jetstream.ts";
import type { WorkerStats } from "../delivery/worker.ts";
import type { Database } from "../platform/db.ts";
import { describeError } from "../platform/errors.ts";
import type { Nats } from "../platform/nats.ts";
import { retentionTables, type Removed } from "../retention/job.ts";
import { daysCovered, listPartitions, partitionedTables } from "../retention/partitions.ts";

type Role = "rpc" | "gateway" | "worker" | "scheduler" | "watcher";

/** What the gateway reports of each request (GatewayOptions.observe). */
export interface HttpObservation {
  route: string;
  method: string;
  status: number;
  seconds: number;
}

/** What the delivery worker reports of each attempt whose outcome it recorded (WorkerOptions.onAttempt). */
export interface AttemptObservation {
  number: number;
  startedAt: Date;
  result: AttemptResult;
  outcome: Outcome;
  /** The event's created_at: it starts the commit → first-attempt clock. */
  eventCreatedAt: Date;
}

/** A gauge read from the database or NATS fails within this long, so a scrape answers in time. */
const gaugeTimeoutMs = 3000;
/** Counting gauges stop at this many rows: a huge backlog shows as the cap, and the count stays cheap. */
export const countCap = 100_000;

const httpMethods = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]);

/** An HTTP method as a label: the usual ones as they are, anything else "other". */
export function methodLabel(method: string | undefined): string {
  return method !== undefined && httpMethods.has(method) ? method : "other";
}

/** An attempt's classification: the HTTP status class ("2xx" … "5xx"), or why no response came (timeout, dns, connect, tls, transport, security). */
export function attemptClassification(result: AttemptResult): string {
  if ("error" in result) return result.error;
  const cls = Math.floor(result.statusCode / 100);
  return cls >= 1 && cls <= 5 ? `${cls}xx` : "other";
}

/** The idempotency outcome of an RPC, from its response header or its error code; undefined when the key played no part. */
export function idempotencyOutcome(replayedHeader: string | null, errorCode: string | undefined): "replayed" | "conflict" | "in_progress" | undefined {
  if (errorCode === "idempotency_conflict") return "conflict";
  if (errorCode === "idempotency_in_progress") return "in_progress";
  if (errorCode === undefined && replayedHeader === "true") return "replayed";
  return undefined;
}

/**
 * A gauge whose value is read at scrape time and left out of the scrape when the read failed,
 * rather than showing 0 or a stale value.
 */
class ScrapedGauge extends Gauge {
  known = false;
  override async get() {
    const metric = await super.get();
    return this.known ? metric : { ...metric, values: [] };
  }
}

function withTimeout<T>(p: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not answer within ${gaugeTimeoutMs} ms`)), gaugeTimeoutMs);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

export interface Metrics {
  registry: Registry;
  /** For GatewayOptions.observe. */
  observeHttp(o: HttpObservation): void;
  /** Counts every RPC by method and code, and idempotency replays and conflicts; first in the list, so it sees the final error. */
  rpcInterceptor: Interceptor;
  /** For the delivery worker's onAttempt. */
  onAttempt(a: AttemptObservation): void;
  /** The worker role's JetStream prefix, once known: its consumer's gauges are read from then on. */
  watchConsumer(prefix: string): void;
  /** The delivery worker's fair-share state, read at scrape. */
  watchWorker(stats: WorkerStats): void;
  /** What a retention run of this process removed (startRetention's onRun). */
  retentionRun(removed: Removed): void;
}

/** Endpoints named in the per-endpoint in-flight gauge: the busiest ones; the rest are summed as "other". */
export const inFlightTopN = 10;

/** The `topN` busiest endpoints by attempts in flight, and the sum of the rest under "other": a label set of at most topN + 1. */
export function busiest(inFlight: Map<string, number>, topN: number): [string, number][] {
  const sorted = [...inFlight].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
  const top = sorted.slice(0, topN);
  const rest = sorted.slice(topN).reduce((sum, [, n]) => sum + n, 0);
  return rest > 0 ? [...top, ["other", rest]] : top;
}

/**
 * The process's Prometheus registry: default process metrics, and the series of this process's
 * roles only. Label values come from fixed sets (route templates, method names, codes), never
 * from ids, keys or raw paths.
 */
export function createMetrics(o: { roles: readonly Role[]; db: Database; nats: Nats }): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const has = (role: Role) => o.roles.includes(role);
  const on = (role: Role) => (has(role) ? [registry] : []);

  const http = new Histogram({
    name: "payments_http_request_duration_seconds",
    help: "REST gateway requests by route template (\"unmatched\" for no route, \"page\" for a page), method and status.",
    labelNames: ["route", "method", "status"] as const,
    registers: on("gateway"),
  });
  const rpc = new Histogram({
    name: "payments_rpc_duration_seconds",
    help: "RPCs (gRPC, Connect, and REST through the gateway) by method and code (\"ok\" or the documented error code).",
    labelNames: ["method", "code"] as const,
    registers: on("rpc"),
  });
  const idempotency = new Counter({
    name: "payments_idempotency_outcomes_total",
    help: "Requests with an Idempotency-Key that were replayed, refused as a conflict, or refused as still in progress.",
    labelNames: ["outcome"] as const,
    registers: on("rpc"),
  });
  for (const outcome of ["replayed", "conflict", "in_progress"]) idempotency.inc({ outcome }, 0);
  const attempts = new Counter({
    name: "payments_webhook_attempts_total",
    help: "Webhook delivery attempts by outcome (success, retryable, terminal) and classification (2xx…5xx, or timeout, dns, connect, tls, transport, security).",
    labelNames: ["outcome", "classification"] as const,
    registers: on("worker"),
  });
  const firstAttempt = new Histogram({
    name: "payments_webhook_first_attempt_delay_seconds",
    help: "From an event's created_at (its commit) to the start of a delivery's first attempt.",
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800],
    registers: on("worker"),
  });

  let worker: WorkerStats | undefined;
  new Gauge({
    name: "payments_webhook_endpoint_attempts_in_flight",
    help: `This worker's attempts in flight per endpoint id: the ${inFlightTopN} busiest endpoints, the rest summed as endpoint="other".`,
    labelNames: ["endpoint"] as const,
    registers: on("worker"),
    collect() {
      this.reset();
      for (const [endpoint, n] of busiest(worker?.inFlight() ?? new Map(), inFlightTopN)) this.set({ endpoint }, n);
    },
  });
  new Gauge({
    name: "payments_webhook_held_messages",
    help: "Delivery messages this worker holds for a free slot of their endpoint (kept alive with working()).",
    registers: on("worker"),
    collect() {
      this.set(worker?.held() ?? 0);
    },
  });
  new Gauge({
    name: "payments_webhook_endpoint_circuits_open",
    help: "Endpoints whose circuit is open in this worker (they timed out WEBHOOK_CIRCUIT_TIMEOUTS times in a row: one attempt at a time until one is answered).",
    registers: on("worker"),
    collect() {
      this.set(worker?.openCircuits() ?? 0);
    },
  });
  new Counter({
    name: "payments_webhook_held_back_total",
    help: "Delivery messages this worker sent back to JetStream (or the outbox) because their endpoint had no free slot; no attempt is counted.",
    registers: on("worker"),
    collect() {
      this.reset();
      this.inc(worker?.heldBackTotal() ?? 0);
    },
  });

  let consumer: { stream: string; lanes: { main: string; backlog: string } } | undefined;
  const scrapeErrors = new Counter({
    name: "payments_scrape_errors_total",
    help: "Gauges left out of a scrape because their source (database or nats) could not be read.",
    labelNames: ["source"] as const,
    registers: has("worker") || has("scheduler") ? [registry] : [],
    collect: async () => void (await snapshot()),
  });
  if (has("worker") || has("scheduler")) scrapeErrors.inc({ source: "database" }, 0);
  if (has("worker")) scrapeErrors.inc({ source: "nats" }, 0);

  const gauge = (name: string, help: string, role: Role) => {
    const g = new ScrapedGauge({ name, help, registers: on(role), collect: async () => void (await snapshot()) });
    return g;
  };
  const backlog = gauge("payments_webhook_outbox_backlog", `Deliveries due and not yet published to JetStream (counted up to ${countCap}).`, "worker");
  const outboxRetries = gauge(
    "payments_webhook_outbox_waiting_retries",
    `Retries (and deliveries held back for a free slot) waiting in the outbox, out of JetStream, for their due time (later than WEBHOOK_STREAM_WAIT_SECONDS, or over an endpoint's WEBHOOK_ENDPOINT_STREAM_RETRIES; counted up to ${countCap}).`,
    "worker",
  );
  const pendingRetry = gauge("payments_webhook_deliveries_pending_retry", `Deliveries waiting for a retry after a failed attempt (counted up to ${countCap}).`, "worker");
  const lag = gauge("payments_scheduler_lag_seconds", "Seconds since the oldest payment intent due for expiry that is not expired yet (0 when none is due).", "scheduler");
  const retentionRemoved = new Counter({
    name: "payments_retention_rows_removed_total",
    help: "Rows this process's retention runs removed, by table.",
    labelNames: ["table"] as const,
    registers: on("scheduler"),
  });
  for (const table of retentionTables) retentionRemoved.inc({ table }, 0);
  const tableBytes = new ScrapedGauge({
    name: "payments_table_bytes",
    help: "Size of each table that grows with traffic, its indexes and TOAST included (pg_total_relation_size; of all its partitions for one partitioned by day).",
    labelNames: ["table"] as const,
    registers: on("scheduler"),
    collect: async () => void (await snapshot()),
  });
  const partitionBytes = new ScrapedGauge({
    name: "payments_partition_bytes",
    help: "Size of each partition of the webhook tables partitioned by day (its legacy partition: the rows from before), indexes and TOAST included.",
    labelNames: ["table", "partition"] as const,
    registers: on("scheduler"),
    collect: async () => void (await snapshot()),
  });
  const daysAhead = gauge(
    "payments_partition_days_ahead",
    "Days after now that every table partitioned by day has partitions for (made a week ahead; an insert of a day with none fails): readiness warns under 2.",
    "scheduler",
  );
  // The tables retention removes from, and the one it keeps whole, sized for payments_table_bytes.
  const sizedTables = [...retentionTables, "payment_intents"];
  const retentionSuccess = gauge("payments_retention_last_success_timestamp_seconds", "When the retention job (any process's) last completed a run, in Unix seconds; readiness warns when it is late.", "scheduler");
  // One series per lane's consumer (delivery/lanes.ts): main, and backlog (busy merchants' surplus).
  const laneGauge = (name: string, help: string) =>
    new ScrapedGauge({ name, help, labelNames: ["lane"] as const, registers: on("worker"), collect: async () => void (await snapshot()) });
  const numPending = laneGauge("payments_jetstream_consumer_num_pending", "The delivery consumer's messages not yet delivered (num_pending), per lane.");
  const numAckPending = laneGauge("payments_jetstream_consumer_num_ack_pending", "The delivery consumer's messages delivered and not yet acknowledged, retries waiting included (num_ack_pending), per lane.");
  const numRedelivered = laneGauge("payments_jetstream_consumer_num_redelivered", "The delivery consumer's messages delivered more than once and not yet acknowledged (num_redelivered), per lane.");
  const maxAckPending = laneGauge("payments_jetstream_consumer_max_ack_pending", "The delivery consumer's max_ack_pending (WEBHOOK_MAX_ACK_PENDING), per lane: at num_ack_pending, it hands out nothing more.");

  const readDatabase = async () => {
    const counts = (table: string, where: string) => `(select count(*) from (select 1 from ${table} where ${where} limit ${countCap}) s)::int`;
    const columns: string[] = [];
    if (has("worker")) {
      columns.push(`${counts("webhook_deliveries", "published_at is null and (next_attempt_at is null or next_attempt_at <= now())")} as backlog`);
      columns.push(`${counts("webhook_deliveries", "published_at is null and next_attempt_at > now()")} as outbox_retries`);
      columns.push(`${counts("webhook_deliveries", "status = 'pending' and attempt_count > 0")} as pending_retry`);
    }
    if (has("scheduler")) {
      // A table partitioned by day is the sum of its partitions (it has none of its own; a plain table has no tree).
      for (const table of sizedTables) columns.push(`greatest(pg_total_relation_size('${table}'), (select coalesce(sum(pg_total_relation_size(relid)), 0) from pg_partition_tree('${table}')))::float8 as "bytes_${table}"`);
      columns.push(`(select extract(epoch from last_success_at)::float8 from retention_state where id = 'retention') as retention_success`);
      // One index lookup per status (status, expires_at), not a scan of every due intent.
      const oldest = (status: string) => `(select min(expires_at) from payment_intents where status = '${status}' and expires_at <= now())`;
      columns.push(`coalesce(extract(epoch from now() - least(${oldest("pending")}, ${oldest("underpaid")})), 0)::float8 as lag`);
    }
    const rows = await o.db.em.fork().transactional(async (tx) => {
      await tx.execute("set local statement_timeout = 2000");
      return tx.execute<{ backlog?: number; outbox_retries?: number; pending_retry?: number; lag?: number; retention_success?: number | null; [bytes: `bytes_${string}`]: number }[]>(
        `select ${columns.join(", ")}`,
      );
    });
    const row = rows[0] ?? {};
    if (has("worker")) {
      backlog.set(Number(row.backlog));
      outboxRetries.set(Number(row.outbox_retries));
      pendingRetry.set(Number(row.pending_retry));
    }
    if (has("scheduler")) {
      lag.set(Number(row.lag));
      for (const table of sizedTables) tableBytes.set({ table }, Number(row[`bytes_${table}`]));
      const parts = await o.db.em.fork().execute<{ parent: string; name: string; bytes: number }[]>(
        `select p.relname as parent, c.relname as name, pg_total_relation_size(c.oid)::float8 as bytes
           from pg_inherits i join pg_class c on c.oid = i.inhrelid join pg_class p on p.oid = i.inhparent
          where p.relname in (${partitionedTables.map((t) => `'${t.table}'`).join(", ")})`,
      );
      partitionBytes.reset();
      for (const r of parts) partitionBytes.set({ table: r.parent, partition: r.name }, Number(r.bytes));
      daysAhead.set(daysCovered(await listPartitions(o.db.em.fork()), new Date()));
      // Never run: no series, rather than a 1970 that would read as very late and very precise.
      if (row.retention_success === null || row.retention_success === undefined) retentionSuccess.reset();
      else retentionSuccess.set(Number(row.retention_success));
    }
  };
  const readConsumer = async () => {
    if (!consumer) throw new Error("the delivery consumer is not known yet");
    const nc = await o.nats.connected;
    const jsm = await jetstreamManager(nc, { checkAPI: false, timeout: gaugeTimeoutMs });
    const { stream, lanes } = consumer;
    const infos = await Promise.all(Object.entries(lanes).map(async ([lane, name]) => ({ lane, info: await jsm.consumers.info(stream, name) })));
    for (const { lane, info } of infos) {
      numPending.set({ lane }, info.num_pending);
      numAckPending.set({ lane }, info.num_ack_pending);
      numRedelivered.set({ lane }, info.num_redelivered);
      maxAckPending.set({ lane }, info.config.max_ack_pending ?? 0);
    }
  };

  // One read of each source per scrape, shared by every gauge (and the error counter) of that scrape.
  let inflight: Promise<void> | undefined;
  const snapshot = (): Promise<void> => {
    inflight ??= (async () => {
      const reads: Promise<void>[] = [];
      const read = (source: "database" | "nats", gauges: ScrapedGauge[], fn: () => Promise<void>) =>
        reads.push(
          withTimeout(fn(), source).then(
            () => gauges.forEach((g) => (g.known = true)),
            () => {
              gauges.forEach((g) => (g.known = false));
              scrapeErrors.inc({ source });
            },
          ),
        );
      if (has("worker") || has("scheduler")) read("database", [...(has("worker") ? [backlog, outboxRetries, pendingRetry] : []), ...(has("scheduler") ? [lag, tableBytes, partitionBytes, daysAhead, retentionSuccess] : [])], readDatabase);
      if (has("worker")) read("nats", [numPending, numAckPending, numRedelivered, maxAckPending], readConsumer);
      await Promise.all(reads);
    })().finally(() => (inflight = undefined));
    return inflight;
  };

  const rpcInterceptor: Interceptor = (next) => async (req) => {
    const started = performance.now();
    const method = `${req.service.typeName}/${req.method.name}`;
    const seconds = () => (performance.now() - started) / 1000;
    try {
      const res = await next(req);
      rpc.observe({ method, code: "ok" }, seconds());
      const outcome = idempotencyOutcome(res.header.get("idempotent-replayed"), undefined);
      if (outcome) idempotency.inc({ outcome });
      return res;
    } catch (err) {
      const code = describeError(err).code;
      rpc.observe({ method, code }, seconds());
      const outcome = idempotencyOutcome(null, code);
      if (outcome) idempotency.inc({ outcome });
      throw err;
    }
  };

  return {
    registry,
    observeHttp(h) {
      http.observe({ route: h.route, method: methodLabel(h.method), status: String(h.status) }, h.seconds);
    },
    rpcInterceptor,
    onAttempt(a) {
      attempts.inc({ outcome: a.outcome, classification: attemptClassification(a.result) });
      if (a.number === 1) firstAttempt.observe(Math.max(0, (a.startedAt.getTime() - a.eventCreatedAt.getTime()) / 1000));
    },
    watchWorker(stats) {
      worker = stats;
    },
    retentionRun(removed) {
      for (const [table, n] of Object.entries(removed)) if (n > 0) retentionRemoved.inc({ table }, n);
    },
    watchConsumer(prefix) {
      const names = streamNames(prefix);
      consumer = { stream: names.stream, lanes: { main: names.consumer, backlog: names.backlogConsumer } };
    },
  };
}
