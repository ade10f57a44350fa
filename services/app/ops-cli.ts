// Ops view: tables for people, --json for machines; logs on stderr; one line and exit 2 on bad input,
// exit 1 when what it reads is not there (NATS down, no stream or table yet).
//   ops consumers [--json]
//   ops deliveries [--status S] [--merchant ID] [--limit N] [--json]
//   ops rejected-outputs [--limit N] [--json]
//   ops payment-exceptions [--merchant ID] [--limit N] [--json]   payments that never count: another asset, or after the intent stopped taking payments
//   ops recover --endpoint ID --since TIME   (JSON always; the running service's AdminService: RPC_URL, INTERNAL_CREDENTIAL)
//   ops chains [--json]                    each chain's watcher: tip, head, lease, whether counting stopped, and what it said of its node
//   ops chain-resume --network N --environment test|live   resumes a chain a deep reorg stopped
//   ops retention [--json]                 each table's size, oldest row and what the next retention run removes
//   ops retention run [--json]             runs retention now (unless a process is running it)
//   ops reset [--yes]                      removes this checkout's embedded data and its JetStream streams
import { existsSync, readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { adminClient, parseTime, remoteError, type RemoteError } from "../admin/client.ts";
import { JetStreamApiCodes, JetStreamApiError, jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { deliveryPrefix, streamNames } from "../delivery/jetstream.ts";
import { deliveryStatuses, isDeliveryStatus } from "../vocabulary/delivery-status.ts";
import { listDeliveriesForOps } from "../webhooks/deliveries.ts";
import { listPaymentExceptions } from "../chains/outputs.ts";
import { listRejections } from "../chains/rejected-outputs.ts";
import { listWatchers, nodeReports, resumeChain, resumeLapseSeconds } from "../chains/store.ts";
import { followedNetworks } from "../vocabulary/assets.ts";
import type { EntityManager } from "../platform/db.ts";
import { ConfigError, loadConfig, redactUserinfo, type Config } from "../platform/config.ts";
import { natsServers } from "../platform/nats.ts";
import { openDatabase } from "./database.ts";
import { createLogger } from "../platform/logger.ts";
import { installationId } from "../platform/settings.ts";
import { cliDatabase, locateNats, resolveDatabase } from "./resources.ts";
import { reachable } from "../platform/reachable.ts";
import { rootDataDir } from "./embedded-postgres.ts";
import { hostname } from "node:os";
import { formatSeconds, retentionLate, retentionReport, retentionStatus, runRetention, type Removed, type RetentionStatus, type TableReport } from "../retention/job.ts";
import { daysCovered, listPartitions, partitionedTables, partitionsDropped } from "../retention/partitions.ts";

const usage = `usage:
  ops consumers [--json]        the delivery stream and its two lanes' consumers (JETSTREAM_PREFIX)
  ops deliveries [--status ${deliveryStatuses.join("|")}] [--merchant ID] [--limit N (1-1000, default 50)] [--json]
                                webhook deliveries, newest first, with why each was made
                                (cause: event, replay, recovery) and their last error
  ops rejected-outputs [--limit N] [--json]
                                outputs watchers reported that the core refused, newest first, with why
  ops payment-exceptions [--merchant ID] [--limit N] [--json]
                                payments that will never count for the intent they paid (another
                                asset, or paid after it was cancelled or past its late-payment window),
                                newest first, and when the merchant was told (payment.exception)
  ops recover --endpoint WEBHOOK_ENDPOINT_ID --since 2026-01-01T00:00:00Z
                                replays the endpoint's failed deliveries created since then (JSON);
                                calls the running service at RPC_URL with INTERNAL_CREDENTIAL
  ops chains [--json]           each chain a watcher follows: its tip, the node's head, the lease's
                                holder, whether counting stopped (a reorg deeper than the maximum) or a
                                resume is armed (for which fork, until when), and
                                what each watcher last said of its node (host, and why it does not follow it)
  ops chain-resume --network NETWORK --environment test|live [--lapse-seconds N]
                                resumes a stopped chain once a person has checked the node: the fork
                                that stopped it is taken whatever its depth, once; the resume lapses
                                when the chain goes on without it, or after N seconds (default 3600)
  ops retention [--json]        each table that grows with traffic: its retention, size, oldest row,
                                and what the next retention run removes; when the job last ran
  ops retention run [--json]    applies retention now (one run at a time across processes: says so
                                and exits 1 when another process holds the job's lease)
  ops reset [--yes]             what npm start's embedded default keeps for this checkout (DATA_DIR, the
                                cluster it names, the JetStream streams of its prefix): listed, and
                                removed with --yes; the server must be stopped`;

/** A message for one line on stderr; exit 2 for bad input, 1 for something missing. */
class OpsError extends Error {
  exitCode: number;
  constructor(message: string, exitCode = 2) {
    super(message);
    this.exitCode = exitCode;
  }
}

// ---- output ----

/** One line per cell: no control characters (escape sequences, newlines) from stored text. */
function cell(value: unknown, max = 60): string {
  if (value === null || value === undefined || value === "") return "-";
  const text = (value instanceof Date ? value.toISOString().replace(/\.\d+Z$/, "Z") : String(value)).replace(/[\x00-\x1f\x7f-\x9f]/g, " ");
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

function table(headers: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (r: readonly string[]) => r.map((c, i) => c.padEnd(widths[i]!)).join("  ").trimEnd();
  return [line(headers), ...rows.map(line)].join("\n");
}

const seconds = (ns: number | undefined) => (ns === undefined ? undefined : ns / 1e9);
const showSeconds = (s: unknown) => (Array.isArray(s) ? (s.length ? s.map((x) => `${x}s`).join(", ") : "-") : s == null ? "-" : `${s}s`);

// ---- consumers ----

const notFound = (err: unknown, code: number) => err instanceof JetStreamApiError && err.code === code;

/** JETSTREAM_PREFIX, or the installation's own (from its database). */
async function prefixOf(config: Config): Promise<string> {
  if (config.jetstreamPrefix !== undefined) return config.jetstreamPrefix;
  const logger = createLogger(process.env.LOG_LEVEL ? config.logLevel : "warn", 2);
  const resources = await resolveDatabase(cliDatabase(config).config, logger);
  const db = await openDatabase(resources.databaseUrl, 1);
  try {
    return deliveryPrefix(undefined, await installationId(db.em.fork()));
  } finally {
    await db.close();
    await resources.stopDatabase();
  }
}

async function consumers(config: Config) {
  const url = await locateNats(config);
  let nc: NatsConnection;
  try {
    nc = await connect({ servers: natsServers(url), name: "ops-cli", timeout: 3000, reconnect: false });
  } catch (err) {
    throw new OpsError(`NATS is not reachable at ${natsServers(url).map(redactUserinfo).join(",")} (${(err as Error).message})`, 1);
  }
  try {
    const names = streamNames(await prefixOf(config));
    const jsm = await jetstreamManager(nc);
    const si = await jsm.streams.info(names.stream).catch((err: unknown) => {
      if (notFound(err, JetStreamApiCodes.StreamNotFound)) throw new OpsError(`no stream ${names.stream} yet: start a worker (npm start) to create it`, 1);
      throw err;
    });
    const info = (name: string) =>
      jsm.consumers.info(names.stream, name).catch((err: unknown) => {
        if (notFound(err, JetStreamApiCodes.ConsumerNotFound)) {
          throw new OpsError(`no consumer ${name} on stream ${names.stream} yet: start a worker (npm start) to create it`, 1);
        }
        throw err;
      });
    const view = (ci: Awaited<ReturnType<typeof info>>) => ({
      name: ci.name,
      description: ci.config.description ?? null,
      subject: ci.config.filter_subject ?? null,
      max_deliver: ci.config.max_deliver ?? null,
      backoff_seconds: (ci.config.backoff ?? []).map((ns) => ns / 1e9),
      ack_wait_seconds: seconds(ci.config.ack_wait) ?? null,
      max_ack_pending: ci.config.max_ack_pending ?? null,
      num_pending: ci.num_pending,
      num_ack_pending: ci.num_ack_pending,
      num_redelivered: ci.num_redelivered,
      num_waiting: ci.num_waiting,
    });
    // The main lane's consumer, and the backlog lane's (a busy merchant's surplus: delivery/lanes.ts).
    const [main, backlog] = await Promise.all([info(names.consumer), info(names.backlogConsumer)]);
    return {
      stream: {
        name: si.config.name,
        description: si.config.description ?? null,
        subjects: si.config.subjects ?? [],
        retention: si.config.retention,
        messages: si.state.messages,
        duplicate_window_seconds: seconds(si.config.duplicate_window) ?? null,
      },
      consumer: view(main),
      backlog_consumer: view(backlog),
    };
  } finally {
    await nc.close();
  }
}

/** "field  value" rows headed by the object's kind and name; *_seconds fields shown as "60s, 300s". */
function section(kind: string, o: { name: string } & Record<string, unknown>): string[][] {
  const { name, ...rest } = o;
  const rows = Object.entries(rest).map(([k, v]) =>
    k.endsWith("_seconds") ? [k.slice(0, -"_seconds".length), showSeconds(v)] : [k, cell(Array.isArray(v) ? v.join(", ") : v, 200)],
  );
  return [[kind, name], ...rows];
}

function consumersTable(v: Awaited<ReturnType<typeof consumers>>): string {
  const [head, ...rows] = section("stream", v.stream);
  return table(head!, [...rows, ["", ""], ...section("consumer", v.consumer), ["", ""], ...section("consumer", v.backlog_consumer)]);
}

// ---- deliveries ----

interface DeliveryOptions {
  status: string | undefined;
  merchant: string | undefined;
  limit: number;
}

function deliveryOptions(values: { status?: string; merchant?: string; limit?: string }): DeliveryOptions {
  const status = values.status?.trim();
  if (status !== undefined && !isDeliveryStatus(status)) throw new OpsError(`--status must be one of ${deliveryStatuses.join(", ")}, got "${status}"`);
  const merchant = values.merchant?.trim();
  if (merchant === "") throw new OpsError("--merchant needs a merchant id");
  const raw = values.limit?.trim() ?? "50";
  const limit = /^\d{1,4}$/.test(raw) ? Number(raw) : NaN;
  if (!(limit >= 1 && limit <= 1000)) throw new OpsError(`--limit must be a whole number from 1 to 1000, got "${raw}"`);
  return { status, merchant, limit };
}

interface DeliveryView {
  id: string;
  merchant_id: string;
  environment: string;
  endpoint_id: string;
  event_id: string;
  event_type: string;
  status: string;
  /** Why it was made: event, replay or recovery. */
  cause: string;
  attempt_count: number;
  last_status_code: number | null;
  last_error: string | null;
  last_attempt_at: string | null;
  next_attempt_at: string | null;
  created_at: string;
}

/** Reads the service's database (as the admin CLI finds it); a missing `table` says to start or migrate the service. */
async function fromDatabase<T>(config: Config, table: string, read: (em: EntityManager) => Promise<T>): Promise<T> {
  const logger = createLogger(process.env.LOG_LEVEL ? config.logLevel : "warn", 2);
  const resources = await resolveDatabase(cliDatabase(config).config, logger);
  const db = await openDatabase(resources.databaseUrl, 1);
  try {
    return await read(db.em.fork()).catch((err: { code?: string }) => {
      if (err.code === "42P01") throw new OpsError(`no ${table} table yet: start the service (npm start) or run npm run migrate`, 1);
      throw err;
    });
  } finally {
    await db.close();
    await resources.stopDatabase();
  }
}

const iso = (t: unknown) => (t === null || t === undefined ? null : new Date(t as string).toISOString());

async function deliveries(config: Config, o: DeliveryOptions): Promise<DeliveryView[]> {
  const rows = await fromDatabase(config, "webhook_deliveries", (em) => listDeliveriesForOps(em, o));
  return rows.map((r) => ({
    ...(r as unknown as DeliveryView),
    last_attempt_at: iso(r.last_attempt_at),
    next_attempt_at: iso(r.next_attempt_at),
    created_at: iso(r.created_at)!,
  }));
}

function deliveriesTable(rows: DeliveryView[], o: DeliveryOptions): string {
  if (rows.length === 0) return `no ${o.status ? `${o.status} ` : ""}deliveries${o.merchant ? ` for ${o.merchant}` : ""}`;
  const time = (t: string | null) => cell(t && new Date(t));
  return table(
    ["delivery", "merchant", "env", "endpoint", "event", "event type", "status", "cause", "attempts", "last code", "last error", "last attempt", "next attempt"],
    rows.map((r) => [
      cell(r.id),
      cell(r.merchant_id),
      cell(r.environment),
      cell(r.endpoint_id),
      cell(r.event_id),
      cell(r.event_type),
      cell(r.status),
      cell(r.cause),
      cell(r.attempt_count),
      cell(r.last_status_code),
      cell(r.last_error),
      time(r.last_attempt_at),
      time(r.next_attempt_at),
    ]),
  );
}

// ---- rejected outputs ----

async function rejectedOutputs(config: Config, limit: number) {
  const rows = await fromDatabase(config, "chain_rejected_observations", (em) => listRejections(em, limit));
  return rows.map((r) => ({ ...r, first_at: iso(r.first_at), last_at: iso(r.last_at) }));
}

function rejectedTable(rows: Awaited<ReturnType<typeof rejectedOutputs>>): string {
  if (rows.length === 0) return "no rejected outputs";
  return table(
    ["network", "env", "tx", "output", "asset", "to", "amount", "reports", "last reported", "reason"],
    rows.map((r) => [cell(r.network), cell(r.environment), cell(r.tx_hash, 20), cell(r.output_index), cell(r.asset), cell(r.to_address, 20), cell(r.amount, 24), cell(r.reports), cell(r.last_at && new Date(r.last_at)), cell(r.reason, 120)]),
  );
}

// ---- payment exceptions ----

async function paymentExceptions(config: Config, o: { merchant?: string | undefined; limit: number }) {
  const rows = await fromDatabase(config, "chain_observations", (em) => listPaymentExceptions(em, { ...o, lateWindowSeconds: config.latePaymentWindowSeconds }));
  return rows.map(({ id: _, ...r }) => ({ ...r, observed_at: iso(r.observed_at), exception_reported_at: iso(r.exception_reported_at) }));
}

function paymentExceptionsTable(rows: Awaited<ReturnType<typeof paymentExceptions>>): string {
  if (rows.length === 0) return "no payment exceptions";
  return table(
    ["intent", "merchant", "env", "network", "intent asset", "status", "reason", "paid", "amount", "tx", "output", "seen", "merchant told"],
    rows.map((r) => [
      cell(r.payment_intent_id), cell(r.merchant_id), cell(r.environment), cell(r.network), cell(r.intent_asset), cell(r.intent_status), cell(r.reason),
      cell(r.asset), cell(r.amount, 24), cell(r.tx_hash, 20), cell(r.output_index), cell(r.observed_at && new Date(r.observed_at)),
      r.exception_reported_at ? cell(new Date(r.exception_reported_at)) : "not yet (confirmations)",
    ]),
  );
}

// ---- chains ----

async function chains(config: Config) {
  const [rows, reports] = await fromDatabase(config, "chain_watchers", (em) => Promise.all([listWatchers(em), nodeReports(em)]));
  const key = (c: { network: string; environment: string }) => `${c.network} ${c.environment}`;
  const nodes = (c: { network: string; environment: string }) =>
    reports.filter((r) => key(r) === key(c)).map((r) => ({ watcher_id: r.watcherId, node: r.node, problem: r.problem, reported_at: r.reportedAt.toISOString() }));
  // A watcher that never followed its node (refused from the start) has said so, with no position yet.
  const unplaced = [...new Map(reports.filter((r) => !rows.some((w) => key(w) === key(r))).map((r) => [key(r), r])).values()];
  return [
    ...rows.map((r) => ({
      network: r.network,
      environment: r.environment,
      height: r.height,
      head_height: r.headHeight,
      holder: r.holder as string | null,
      lease_expires_at: r.leaseExpiresAt.toISOString() as string | null,
      saved_at: r.savedAt?.toISOString() ?? null,
      halted_depth: r.haltedDepth,
      halted_depth_is_lower_bound: r.haltedDepth !== null && r.haltedDepthIsLowerBound,
      halted: r.haltedReason,
      resume: r.resume && { branch_height: r.resume.branchHeight, branch_hash: r.resume.branchHash, until: r.resume.until.toISOString() },
      nodes: nodes(r),
    })),
    ...unplaced.map((r) => ({
      network: r.network,
      environment: r.environment,
      height: null,
      head_height: null,
      holder: null,
      lease_expires_at: null,
      saved_at: null,
      halted_depth: null,
      halted_depth_is_lower_bound: false,
      halted: null,
      resume: null,
      nodes: nodes(r),
    })),
  ].sort((a, b) => key(a).localeCompare(key(b)));
}

function chainsTable(rows: Awaited<ReturnType<typeof chains>>): string {
  if (rows.length === 0) return "no chain followed yet";
  const node = (r: (typeof rows)[number]) => {
    const last = r.nodes[0];
    return last ? `${last.node}: ${last.problem ?? "followed"}` : null;
  };
  return table(
    ["network", "env", "tip", "head", "holder", "saved", "counting", "node"],
    rows.map((r) => [
      cell(r.network),
      cell(r.environment),
      cell(r.height),
      cell(r.head_height),
      cell(r.holder, 40),
      cell(r.saved_at && new Date(r.saved_at)),
      cell(r.halted ? `STOPPED: ${r.halted}` : r.resume ? `yes; ${resumeText(r.resume)}` : "yes", 200),
      cell(node(r), 200),
    ]),
  );
}

/** A resume not spent yet, in words: the fork it takes, and until when. */
function resumeText(r: { branch_height: number | null; branch_hash: string | null; until: string }): string {
  const fork = r.branch_hash === null ? "the next fork" : `the fork with block ${r.branch_height} (${r.branch_hash})`;
  return `resumed: ${fork} is taken whatever its depth, once, until ${r.until} or until the chain goes on without it`;
}

async function chainResume(config: Config, network: string | undefined, environment: string | undefined, lapse: string | undefined): Promise<string> {
  if (!network || !(followedNetworks as readonly string[]).includes(network)) throw new OpsError(`--network must be one of ${followedNetworks.join(", ")}`);
  if (environment !== "test" && environment !== "live") throw new OpsError("--environment must be test or live");
  // At most a day: a resume is for the fork a person just looked at, not for one weeks on.
  const seconds = lapse === undefined ? resumeLapseSeconds : /^[1-9][0-9]{0,4}$/.test(lapse) ? Number(lapse) : Number.NaN;
  if (!(seconds <= 86_400)) throw new OpsError("--lapse-seconds must be a whole number of seconds, 1 to 86400");
  const lifted = await fromDatabase(config, "chain_watchers", (em) => resumeChain(em, { network, environment }, seconds));
  if (!lifted) throw new OpsError(`${network} (${environment}) is not stopped: nothing to resume`, 1);
  const fork = lifted.branchHash === null ? "the next fork" : `the fork that stopped it (the branch with block ${lifted.branchHeight}, ${lifted.branchHash})`;
  return (
    `${network} (${environment}) resumed: ${fork} is taken whatever its depth, once; the resume lapses if the chain goes on without it or at ${lifted.until.toISOString()}, ` +
    `and any other fork deeper than the maximum stops the chain again (it was stopped: ${lifted.reason})`
  );
}

// ---- retention ----

async function retention(config: Config) {
  const [tables, status, days, dropping] = await fromDatabase(
    config,
    "retention_state",
    async (em) => [await retentionReport(em, config.retention), await retentionStatus(em), await listPartitions(em), await partitionsDropped(em, config.retention)] as const,
  );
  const now = new Date();
  return {
    tables: tables.map((t) => ({ ...t, oldest: iso(t.oldest) })),
    partitions: partitionedTables.map(({ table }) => {
      const own = days.filter((p) => p.table === table);
      const daily = own.filter((p) => p.from !== undefined);
      return {
        table,
        legacy_until: iso(own.find((p) => p.from === undefined)?.to ?? null),
        days: daily.length,
        first_day: iso(daily[0]?.from ?? null),
        made_until: iso(own.length ? new Date(Math.max(...own.map((p) => p.to.getTime()))) : null),
        next_run_drops: dropping.names.filter((n) => own.some((p) => p.name === n)),
      };
    }),
    days_ahead: Math.floor(daysCovered(days, now) * 10) / 10,
    job: { ...jobView(status), interval: formatSeconds(config.retention.intervalSeconds), late: retentionLate(status, config.retention.intervalSeconds) },
  };
}

function jobView(s: RetentionStatus) {
  return { last_success_at: iso(s.lastSuccessAt), last_started_at: iso(s.lastStartedAt), running: s.holder, lease_until: iso(s.leaseUntil), last_removed: s.lastRemoved };
}

function bytes(n: number): string {
  const units = ["B", "kB", "MB", "GB", "TB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return `${i === 0 ? n : n.toFixed(1)} ${units[i]}`;
}

function retentionTable(view: Awaited<ReturnType<typeof retention>>): string {
  const removable = (t: { removable: number | null }) => (t.removable === null ? "-" : t.removable >= 1_000_000 ? "≥1000000" : String(t.removable));
  const rows = table(
    ["table", "retention", "size", "oldest row", "next run removes"],
    view.tables.map((t: Omit<TableReport, "oldest"> & { oldest: string | null }) => [cell(t.table), cell(t.retention), bytes(t.bytes), cell(t.oldest && new Date(t.oldest)), removable(t)]),
  );
  const parts = table(
    ["partitioned by day", "legacy until", "days", "made until", "next run drops"],
    view.partitions.map((p) => [cell(p.table), cell(p.legacy_until && new Date(p.legacy_until)), String(p.days), cell(p.made_until && new Date(p.made_until)), p.next_run_drops.join(" ") || "-"]),
  );
  const j = view.job;
  const last = j.last_success_at ? `last run ${j.last_success_at}${j.last_removed ? ` removed ${removedLine(j.last_removed)}` : ""}` : "never run";
  return `${rows}

${parts}

retention job (every ${j.interval}): ${last}${j.running ? `; running now in ${j.running} (lease until ${j.lease_until})` : ""}${j.late ? "; LATE: is a scheduler role running?" : ""}`;
}

function removedLine(removed: Partial<Removed>): string {
  const parts = Object.entries(removed).filter(([, n]) => (n ?? 0) > 0).map(([t, n]) => `${n} ${t}`);
  return parts.length > 0 ? parts.join(", ") : "nothing";
}

async function retentionRun(config: Config) {
  const result = await fromDatabase(config, "retention_state", (em) => runRetention(em, config.retention, `ops-cli ${hostname()}-${process.pid}`));
  if (!result.ran) throw new OpsError(`retention is running in ${result.holder} (lease until ${result.leaseUntil.toISOString()}): nothing was run`, 1);
  return { removed: result.removed };
}

// ---- main ----

async function main(argv: string[]): Promise<string> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: {
      json: { type: "boolean" },
      status: { type: "string" },
      merchant: { type: "string" },
      limit: { type: "string" },
      endpoint: { type: "string" },
      since: { type: "string" },
      yes: { type: "boolean" },
      network: { type: "string" },
      environment: { type: "string" },
      "lapse-seconds": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  const command = positionals.join(" ");
  if (values.help || command === "help") return usage;
  const json = (v: unknown) => JSON.stringify(v, null, 2);
  if (command === "consumers") {
    const extra = (["status", "merchant", "limit"] as const).find((k) => values[k] !== undefined);
    if (extra) throw new OpsError(`--${extra} applies to deliveries, not consumers`);
    const view = await consumers(loadConfig());
    return values.json ? json(view) : consumersTable(view);
  }
  if (command === "deliveries") {
    const o = deliveryOptions(values);
    const rows = await deliveries(loadConfig(), o);
    return values.json ? json(rows) : deliveriesTable(rows, o);
  }
  if (command === "recover") return json(await recover(values.endpoint, values.since));
  if (command === "rejected-outputs") {
    const extra = (["status", "merchant"] as const).find((k) => values[k] !== undefined);
    if (extra) throw new OpsError(`--${extra} applies to deliveries, not rejected-outputs`);
    const rows = await rejectedOutputs(loadConfig(), deliveryOptions(values).limit);
    return values.json ? json(rows) : rejectedTable(rows);
  }
  if (command === "payment-exceptions") {
    if (values.status !== undefined) throw new OpsError(`--status applies to deliveries, not payment-exceptions`);
    const o = deliveryOptions(values);
    const rows = await paymentExceptions(loadConfig(), { merchant: o.merchant, limit: o.limit });
    return values.json ? json(rows) : paymentExceptionsTable(rows);
  }
  if (command === "chains") {
    const rows = await chains(loadConfig());
    return values.json ? json(rows) : chainsTable(rows);
  }
  if (command === "retention" || command === "retention run") {
    const extra = (["status", "merchant", "limit"] as const).find((k) => values[k] !== undefined);
    if (extra) throw new OpsError(`--${extra} applies to deliveries, not retention`);
    if (command === "retention run") {
      const run = await retentionRun(loadConfig());
      return values.json ? json(run) : `removed ${removedLine(run.removed)}`;
    }
    const view = await retention(loadConfig());
    return values.json ? json(view) : retentionTable(view);
  }
  if (command === "chain-resume") return chainResume(loadConfig(), values.network, values.environment, values["lapse-seconds"]);
  if (command === "reset") return reset(loadConfig(), values.yes === true);
  throw new OpsError(`${command ? `unknown command "${command}"` : "no command"}: npm run -s ops -- help lists the commands`);
}

// ---- reset ----

/**
 * Removes what `npm start` without DATABASE_URL keeps for this checkout: DATA_DIR (embedded.json,
 * the cluster, the NATS store, the generated key), the cluster's folder when it lives under
 * /var/lib, and the delivery and claim streams of the installation's prefix on whatever NATS it
 * used (a shared one keeps them otherwise). Without --yes it only lists them. Never a database
 * named by DATABASE_URL: that is not this checkout's to drop.
 */
async function reset(config: Config, yes: boolean): Promise<string> {
  const dataDir = path.resolve(config.dataDir);
  const recorded = path.join(dataDir, "server-database.json");
  if (config.databaseUrl || existsSync(recorded)) {
    throw new OpsError(`this checkout's server uses the database at ${redactUserinfo(config.databaseUrl ?? "recorded in " + recorded)}: reset removes only the embedded default's data; drop that database yourself`);
  }
  const settingsFile = path.join(dataDir, "embedded.json");
  if (!existsSync(settingsFile) || dataDir === path.parse(dataDir).root) return `nothing to reset: no embedded data under ${dataDir}`;
  const s = JSON.parse(readFileSync(settingsFile, "utf8")) as { pgPort?: number; natsPort?: number; pgDataDir?: string };
  if (s.pgPort !== undefined && (await reachable("127.0.0.1", s.pgPort))) {
    throw new OpsError(`the embedded PostgreSQL of ${dataDir} is running (port ${s.pgPort}): stop the server (and anything started from this checkout) first`, 1);
  }
  // Only a folder of the kind the embedded default makes: a hand-edited path is not removed.
  const cluster = s.pgDataDir && path.dirname(path.resolve(s.pgDataDir)) === rootDataDir ? path.resolve(s.pgDataDir) : undefined;
  const prefix = await prefixOf(config).catch(() => undefined);
  const nats = await locateNats(config);
  // The embedded nats-server, stopped with the server, keeps its streams under DATA_DIR/nats: they go with it.
  const embeddedNats = nats === `nats://127.0.0.1:${s.natsPort}` && !(await reachable("127.0.0.1", s.natsPort ?? 0));
  const streams = prefix && !embeddedNats ? [streamNames(prefix).stream, streamNames(prefix).claimStream] : [];
  const what = [dataDir, ...(cluster ? [cluster] : []), ...streams.map((name) => `stream ${name} on ${natsServers(nats).map(redactUserinfo).join(",")}`)];
  if (!yes) return [`would remove:`, ...what.map((w) => `  ${w}`), "nothing was removed: run npm run -s ops -- reset --yes to remove them"].join("\n");

  const removed: string[] = [];
  if (streams.length > 0) {
    const nc = await connect({ servers: natsServers(nats), name: "ops-cli", timeout: 3000, reconnect: false }).catch(() => undefined);
    if (!nc) throw new OpsError(`NATS is not reachable at ${natsServers(nats).map(redactUserinfo).join(",")}: nothing was removed; start it (or set NATS_URL) and run reset again`, 1);
    try {
      const jsm = await jetstreamManager(nc);
      for (const name of streams) {
        const gone = await jsm.streams.delete(name).catch((err: unknown) => {
          if (notFound(err, JetStreamApiCodes.StreamNotFound)) return false;
          throw err;
        });
        if (gone) removed.push(`stream ${name}`);
      }
    } finally {
      await nc.close();
    }
  }
  if (cluster) rmSync(cluster, { recursive: true, force: true });
  rmSync(dataDir, { recursive: true, force: true });
  removed.push(...(cluster ? [cluster] : []), dataDir);
  return ["removed:", ...removed.map((r) => `  ${r}`)].join("\n");
}

// ---- recover ----

async function recover(endpointRaw: string | undefined, sinceRaw: string | undefined) {
  const endpointId = endpointRaw?.trim();
  if (!endpointId) throw new OpsError("--endpoint needs a webhook endpoint id");
  const since = parseTime(sinceRaw);
  if (!since) throw new OpsError(`--since must be a time like 2026-01-01T00:00:00Z, got "${sinceRaw ?? ""}"`);
  const config = loadConfig();
  let remote;
  try {
    remote = adminClient(config);
  } catch (err) {
    throw new OpsError((err as Error).message, (err as RemoteError).exitCode ?? 2);
  }
  try {
    const res = await remote.client.recoverFailedDeliveries({ endpointId, since: timestampFromDate(since) }, { headers: remote.headers, timeoutMs: 60_000 });
    return { endpoint_id: endpointId, since: since.toISOString(), recovered: res.recovered, delivery_ids: res.deliveryIds };
  } catch (err) {
    const e = remoteError(err, config.rpcUrl);
    throw new OpsError(e.message, e.exitCode);
  }
}

try {
  process.stdout.write((await main(process.argv.slice(2))) + "\n");
} catch (err) {
  const usageError = err instanceof ConfigError || (err as { code?: string }).code?.startsWith("ERR_PARSE_ARGS");
  const known = err instanceof OpsError || usageError;
  process.stderr.write(`ops: ${known ? (err as Error).message : `failed: ${(err as Error).message}`}\n`);
  process.exitCode = err instanceof OpsError ? err.exitCode : usageError ? 2 : 1;
}
