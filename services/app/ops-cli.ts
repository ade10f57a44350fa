// Ops view: tables for people, --json for machines; logs on stderr; one line and exit 2 on bad input,
// exit 1 when what it reads is not there (NATS down, no stream or table yet).
//   ops consumers [--json]
//   ops deliveries [--status S] [--merchant ID] [--limit N] [--json]
//   ops recover --endpoint ID --since TIME   (JSON always; the running service's AdminService: RPC_URL, INTERNAL_CREDENTIAL)
import { parseArgs } from "node:util";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { adminClient, parseTime, remoteError, type RemoteError } from "../admin/client.ts";
import { JetStreamApiCodes, JetStreamApiError, jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { deliveryPrefix, streamNames } from "../delivery/jetstream.ts";
import { deliveryStatuses, isDeliveryStatus } from "../webhooks/delivery-status.ts";
import { listDeliveriesForOps } from "../webhooks/deliveries.ts";
import { ConfigError, loadConfig, redactUserinfo, type Config } from "../platform/config.ts";
import { natsServers } from "../platform/nats.ts";
import { openDatabase } from "./database.ts";
import { createLogger } from "../platform/logger.ts";
import { installationId } from "../platform/settings.ts";
import { cliDatabase, locateNats, resolveDatabase } from "./resources.ts";

const usage = `usage:
  ops consumers [--json]        the delivery stream and its consumer (JETSTREAM_PREFIX)
  ops deliveries [--status ${deliveryStatuses.join("|")}] [--merchant ID] [--limit N (1-1000, default 50)] [--json]
                                webhook deliveries, newest first, with their last error
  ops recover --endpoint WEBHOOK_ENDPOINT_ID --since 2026-01-01T00:00:00Z
                                replays the endpoint's failed deliveries created since then (JSON);
                                calls the running service at RPC_URL with INTERNAL_CREDENTIAL`;

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
    const ci = await jsm.consumers.info(names.stream, names.consumer).catch((err: unknown) => {
      if (notFound(err, JetStreamApiCodes.ConsumerNotFound)) {
        throw new OpsError(`no consumer ${names.consumer} on stream ${names.stream} yet: start a worker (npm start) to create it`, 1);
      }
      throw err;
    });
    return {
      stream: {
        name: si.config.name,
        description: si.config.description ?? null,
        subjects: si.config.subjects ?? [],
        retention: si.config.retention,
        messages: si.state.messages,
        duplicate_window_seconds: seconds(si.config.duplicate_window) ?? null,
      },
      consumer: {
        name: ci.name,
        description: ci.config.description ?? null,
        max_deliver: ci.config.max_deliver ?? null,
        backoff_seconds: (ci.config.backoff ?? []).map((ns) => ns / 1e9),
        ack_wait_seconds: seconds(ci.config.ack_wait) ?? null,
        max_ack_pending: ci.config.max_ack_pending ?? null,
        num_pending: ci.num_pending,
        num_ack_pending: ci.num_ack_pending,
        num_redelivered: ci.num_redelivered,
        num_waiting: ci.num_waiting,
      },
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
  return table(head!, [...rows, ["", ""], ...section("consumer", v.consumer)]);
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
  attempt_count: number;
  last_status_code: number | null;
  last_error: string | null;
  last_attempt_at: string | null;
  next_attempt_at: string | null;
  created_at: string;
}

async function deliveries(config: Config, o: DeliveryOptions): Promise<DeliveryView[]> {
  const logger = createLogger(process.env.LOG_LEVEL ? config.logLevel : "warn", 2);
  const resources = await resolveDatabase(cliDatabase(config).config, logger);
  const db = await openDatabase(resources.databaseUrl, 1);
  try {
    const rows = await listDeliveriesForOps(db.em.fork(), o)
      .catch((err: { code?: string }) => {
        if (err.code === "42P01") throw new OpsError("no webhook_deliveries table yet: start the service (npm start) or run npm run migrate", 1);
        throw err;
      });
    const iso = (t: unknown) => (t === null || t === undefined ? null : new Date(t as string).toISOString());
    return rows.map((r) => ({
      ...(r as unknown as DeliveryView),
      last_attempt_at: iso(r.last_attempt_at),
      next_attempt_at: iso(r.next_attempt_at),
      created_at: iso(r.created_at)!,
    }));
  } finally {
    await db.close();
    await resources.stopDatabase();
  }
}

function deliveriesTable(rows: DeliveryView[], o: DeliveryOptions): string {
  if (rows.length === 0) return `no ${o.status ? `${o.status} ` : ""}deliveries${o.merchant ? ` for ${o.merchant}` : ""}`;
  const time = (t: string | null) => cell(t && new Date(t));
  return table(
    ["delivery", "merchant", "env", "endpoint", "event", "event type", "status", "attempts", "last code", "last error", "last attempt", "next attempt"],
    rows.map((r) => [
      cell(r.id),
      cell(r.merchant_id),
      cell(r.environment),
      cell(r.endpoint_id),
      cell(r.event_id),
      cell(r.event_type),
      cell(r.status),
      cell(r.attempt_count),
      cell(r.last_status_code),
      cell(r.last_error),
      time(r.last_attempt_at),
      time(r.next_attempt_at),
    ]),
  );
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
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) return usage;
  const command = positionals.join(" ");
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
  throw new OpsError(command ? `unknown command "${command}"\n${usage}` : usage);
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
