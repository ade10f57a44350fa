import type { RetentionSettings } from "../platform/config.ts";
import type { EntityManager } from "../platform/db.ts";
import { legacyDeliveriesRemoval } from "../delivery/webhook-deliveries.ts";
import { unfinishedSql as unfinished } from "../events/retention.ts";
import { dropExpiredPartitions, ensurePartitions, partitionsDropped, type PartitionedTable } from "./partitions.ts";

/**
 * The retention job (issue 50): removes what is past its retention (docs/operations.md,
 * "Retention"), a batch per statement so no transaction holds many rows, one run at a time across
 * every process on the database (a lease in retention_state). Reads already hide what is past
 * retention (idempotency/idempotent.ts, events/retention.ts): the job only frees the space, so a
 * late or skipped run changes no answer. What is still needed is never removed: a key whose
 * request is running is uncommitted (invisible here) or locked and re-checked; an event with a
 * delivery that has not ended stays with all its deliveries.
 */

/** Rows removed in one statement: small enough to hold few locks briefly, large enough to be cheap per row. */
export const batchRows = 5000;
/** A run renews its lease after each batch; a holder silent this long is presumed dead and its run taken over. */
export const leaseSeconds = 300;

/** The tables the job removes from, in its report's order. */
export const retentionTables = [
  "idempotency_records",
  "webhook_events",
  "webhook_deliveries",
  "webhook_attempts",
  "webhook_recoveries",
  "chain_rejected_observations",
  "cashier_sessions",
  "dashboard_sessions",
  "dashboard_links",
] as const;
export type RetentionTable = (typeof retentionTables)[number];
export type Removed = Record<RetentionTable, number>;

const before = "now() - make_interval(secs => ?)";
const dashboardSessionEnded = "least(expires_at, coalesce(revoked_at, expires_at), last_seen_at + make_interval(secs => idle_seconds))";

/**
 * One batch of each kind: its statement (parameters: the retention in seconds, then the batch size)
 * and the tables whose counts it returns. `legacy`: it deletes from the legacy partitions of the
 * webhook tables (rows from before they were partitioned by day), and is skipped once those are
 * gone; the days after are dropped whole (partitions.ts).
 */
const batches: { seconds: (s: RetentionSettings) => number; sql: string; legacy?: true }[] = [
  {
    seconds: (s) => s.idempotencySeconds,
    // The outer condition is checked again on the row as it is when locked: a request that took
    // the key over meanwhile made it new, and it stays.
    sql: `with candidates as (
            select merchant_id, environment, key from idempotency_records where created_at <= ${before} order by created_at limit ?
          ), gone as (
            delete from idempotency_records r using candidates c
             where r.merchant_id = c.merchant_id and r.environment = c.environment and r.key = c.key and r.created_at <= ${before}
            returning 1
          )
          select (select count(*) from gone)::int as idempotency_records`,
  },
  {
    seconds: (s) => s.eventSeconds,
    legacy: true,
    // Events locked first (skip locked: one a replay is being inserted for holds a key-share lock
    // and waits for the next run, when its replay shows as unfinished); their deliveries, which have
    // all ended, and attempts go in the same statement, counted.
    sql: `with ev as (
            select e.id from webhook_events_legacy e
             where e.created_at <= ${before}
               and not exists (select 1 from webhook_deliveries k where k.event_id = e.id and k.status in ${unfinished})
             order by e.created_at limit ? for update of e skip locked
          ), ${legacyDeliveriesRemoval("ev")}, ee as (
            delete from webhook_events_legacy where id in (select id from ev) returning 1
          )
          select (select count(*) from ee)::int as webhook_events, (select count(*) from removed_deliveries)::int as webhook_deliveries,
                 (select count(*) from removed_attempts)::int as webhook_attempts`,
  },
  {
    seconds: (s) => s.eventSeconds,
    // An operator's recovery that ended: what it sent is past retention too. A running one stays.
    sql: `with gone as (
            delete from webhook_recoveries where id in (
              select id from webhook_recoveries where status <> 'running' and updated_at <= ${before} limit ?)
            returning 1
          )
          select (select count(*) from gone)::int as webhook_recoveries`,
  },
  {
    seconds: (s) => s.rejectedOutputSeconds,
    // A rejection reported again meanwhile has a new last_at and stays.
    sql: `with candidates as (
            select network, environment, tx_hash, output_index from chain_rejected_observations where last_at <= ${before} order by last_at limit ?
          ), gone as (
            delete from chain_rejected_observations r using candidates c
             where (r.network, r.environment, r.tx_hash, r.output_index) = (c.network, c.environment, c.tx_hash, c.output_index) and r.last_at <= ${before}
            returning 1
          )
          select (select count(*) from gone)::int as chain_rejected_observations`,
  },
  {
    seconds: (s) => s.cashierSessionSeconds,
    // A session ended when it expired or was revoked, whichever came first.
    sql: `with gone as (
            delete from cashier_sessions where id in (
              select id from cashier_sessions where least(coalesce(revoked_at, expires_at), expires_at) <= ${before} limit ?)
            returning 1
          )
          select (select count(*) from gone)::int as cashier_sessions`,
  },
  {
    seconds: (s) => s.dashboardSessionSeconds,
    // A dashboard session ended at the first of its absolute expiry, its idle expiry and its
    // revocation (sign-out): past any of them it is refused, and it never comes back.
    sql: `with gone as (
            delete from dashboard_sessions where id in (
              select id from dashboard_sessions where ${dashboardSessionEnded} <= ${before} limit ?)
            returning 1
          )
          select (select count(*) from gone)::int as dashboard_sessions`,
  },
  {
    seconds: (s) => s.dashboardSessionSeconds,
    // A sign-in link ended when used or expired; one a session still came from stays with it
    // (removing the link would end that session: its foreign key cascades).
    sql: `with gone as (
            delete from dashboard_links where id in (
              select l.id from dashboard_links l
               where least(coalesce(l.used_at, l.expires_at), l.expires_at) <= ${before}
                 and not exists (select 1 from dashboard_sessions s where s.link_id = l.id)
               limit ?)
            returning 1
          )
          select (select count(*) from gone)::int as dashboard_links`,
  },
];

/** Parameters of a batch: the retention where `?` stands for it, the batch size where `limit ?` does. */
function paramsOf(sql: string, seconds: number, limit: number): unknown[] {
  return [...sql.matchAll(/make_interval\(secs => \?\)|limit \?/g)].map((m) => (m[0] === "limit ?" ? limit : seconds));
}

export function noneRemoved(): Removed {
  return Object.fromEntries(retentionTables.map((t) => [t, 0])) as Removed;
}

export type RunResult = { ran: true; removed: Removed } | { ran: false; holder: string; leaseUntil: Date };

/**
 * Runs retention once if no other process is (else says who is); `stopped()` cuts a long run short
 * between batches (its lease is given back, and what it removed stays removed).
 */
export async function runRetention(em: EntityManager, settings: RetentionSettings, holder: string, stopped: () => boolean = () => false): Promise<RunResult> {
  // A run that ends between this one's claim and its look at the holder leaves the lease free:
  // claimed again (a few times), rather than naming a holder that is no longer there.
  for (let attempt = 1; ; attempt++) {
    const [taken] = await em.execute<{ id: string }[]>(
      `update retention_state set holder = ?, lease_until = now() + make_interval(secs => ?), last_started_at = now()
        where id = 'retention' and (lease_until is null or lease_until < now()) returning id`,
      [holder, leaseSeconds],
    );
    if (taken) break;
    const [other] = await em.execute<{ holder: string | null; lease_until: Date | null }[]>(`select holder, lease_until from retention_state where id = 'retention'`);
    if (other?.holder || attempt >= 3) return { ran: false, holder: other?.holder ?? "unknown", leaseUntil: new Date(other?.lease_until ?? 0) };
  }
  let removed: Removed;
  try {
    removed = await removePastRetention(em, settings, () => renew(em, holder), stopped);
  } catch (err) {
    await em.execute(`update retention_state set holder = null, lease_until = null where id = 'retention' and holder = ?`, [holder]).catch(() => undefined);
    throw err;
  }
  await em.execute(
    `update retention_state set holder = null, lease_until = null, last_success_at = now(), last_removed = ?::jsonb where id = 'retention' and holder = ?`,
    [JSON.stringify(removed), holder],
  );
  return { ran: true, removed };
}

/**
 * The removal itself, batch after batch until each kind has nothing left past its retention;
 * `afterBatch` runs after each (the lease's renewal). Safe to run twice at once (a lease taken
 * over from a holder that was only slow): each batch locks what it removes and checks it again,
 * so no row is removed, or counted, twice.
 */
export async function removePastRetention(
  em: EntityManager,
  settings: RetentionSettings,
  afterBatch: () => Promise<void>,
  stopped: () => boolean = () => false,
  now = new Date(),
): Promise<Removed> {
  const removed = noneRemoved();
  const legacy = await legacyPresent(em);
  for (const batch of batches) {
    if (batch.legacy && !legacy) continue;
    const seconds = batch.seconds(settings);
    for (;;) {
      if (stopped()) throw new RunStopped();
      const [counts] = await em.execute<Partial<Removed>[]>(batch.sql, paramsOf(batch.sql, seconds, batchRows));
      for (const [table, n] of Object.entries(counts ?? {})) removed[table as RetentionTable] += Number(n);
      const first = Number(Object.values(counts ?? {})[0] ?? 0);
      await afterBatch();
      if (first < batchRows) break;
    }
  }
  if (stopped()) throw new RunStopped();
  const days = await dropExpiredPartitions(em, settings, now, stopped);
  for (const [table, n] of Object.entries(days.removed)) removed[table as RetentionTable] += n;
  await afterBatch();
  await ensurePartitions(em, now);
  return removed;
}

/** Whether the webhook tables still have their legacy partitions (rows from before the days). */
async function legacyPresent(em: EntityManager): Promise<boolean> {
  const [row] = await em.execute<{ n: number }[]>(
    `select count(to_regclass(t))::int as n from unnest(array['webhook_events_legacy', 'webhook_deliveries_legacy', 'webhook_attempts_legacy']) t`,
  );
  return row?.n === 3;
}

/** Thrown when a run is stopped between batches (the process is stopping). */
export class RunStopped extends Error {
  override name = "RunStopped";
}

/** Extends the lease; a run that lost it (silent longer than leaseSeconds, and taken over) stops. */
async function renew(em: EntityManager, holder: string): Promise<void> {
  const [still] = await em.execute<{ id: string }[]>(
    `update retention_state set lease_until = now() + make_interval(secs => ?) where id = 'retention' and holder = ? returning id`,
    [leaseSeconds, holder],
  );
  if (!still) throw new Error("the retention run lost its lease to another process");
}

/** The job's last run, for readiness, metrics and the ops view. */
export interface RetentionStatus {
  lastSuccessAt: Date | null;
  lastStartedAt: Date | null;
  holder: string | null;
  leaseUntil: Date | null;
  lastRemoved: Partial<Removed> | null;
}

export async function retentionStatus(em: EntityManager): Promise<RetentionStatus> {
  const [row] = await em.execute<{ last_success_at: Date | null; last_started_at: Date | null; holder: string | null; lease_until: Date | null; last_removed: Partial<Removed> | string | null }[]>(
    `select last_success_at, last_started_at, holder, lease_until, last_removed from retention_state where id = 'retention'`,
  );
  const date = (v: Date | string | null | undefined) => (v === null || v === undefined ? null : new Date(v));
  const removed = row?.last_removed ?? null;
  return {
    lastSuccessAt: date(row?.last_success_at),
    lastStartedAt: date(row?.last_started_at),
    holder: row?.holder ?? null,
    leaseUntil: date(row?.lease_until),
    lastRemoved: typeof removed === "string" ? (JSON.parse(removed) as Partial<Removed>) : removed,
  };
}

/**
 * Whether the job is late: it has not succeeded within twice its interval and a minute (one run
 * may be long, or missed by a restart), or never has. Readiness warns of it.
 */
export function retentionLate(status: Pick<RetentionStatus, "lastSuccessAt">, intervalSeconds: number, now = new Date()): boolean {
  if (!status.lastSuccessAt) return true;
  return now.getTime() - status.lastSuccessAt.getTime() > (2 * intervalSeconds + 60) * 1000;
}

/** What `ops retention` shows of each table: its size, its oldest row, and what the next run would remove (counted up to countCap). */
export interface TableReport {
  table: string;
  retention: string;
  bytes: number;
  oldest: Date | null;
  removable: number | null;
}

/** Counting what the next run removes stops here: the count stays cheap on a huge backlog, shown as "at least". */
export const reportCountCap = 1_000_000;

export async function retentionReport(em: EntityManager, settings: RetentionSettings): Promise<TableReport[]> {
  const capped = (from: string) => `(select count(*) from (select 1 from ${from} limit ${reportCountCap}) s)::bigint`;
  // The webhook tables: what the batches delete from their legacy partitions, and the days dropped whole.
  const legacy = await legacyPresent(em);
  const removableEvents = `webhook_events_legacy e where ${legacy ? "" : "false and "}e.created_at <= ${before}
    and not exists (select 1 from webhook_deliveries k where k.event_id = e.id and k.status in ${unfinished})`;
  const days = await partitionsDropped(em, settings);
  const rows: { table: string; retention: string; oldest: string; removable: string | null; seconds: number }[] = [
    { table: "idempotency_records", retention: "IDEMPOTENCY_RETENTION", oldest: "min(created_at)", removable: capped(`idempotency_records where created_at <= ${before}`), seconds: settings.idempotencySeconds },
    { table: "webhook_events", retention: "EVENT_RETENTION", oldest: "min(created_at)", removable: capped(removableEvents), seconds: settings.eventSeconds },
    {
      table: "webhook_deliveries",
      retention: "EVENT_RETENTION (with their event)",
      oldest: "min(created_at)",
      removable: capped(`webhook_deliveries_legacy d where d.event_id in (select e.id from ${removableEvents})`),
      seconds: settings.eventSeconds,
    },
    {
      table: "webhook_attempts",
      retention: "EVENT_RETENTION (with their event)",
      oldest: "min(started_at)",
      removable: capped(`webhook_attempts_legacy a join webhook_deliveries_legacy d on d.id = a.delivery_id where d.event_id in (select e.id from ${removableEvents})`),
      seconds: settings.eventSeconds,
    },
    { table: "chain_rejected_observations", retention: "REJECTED_OUTPUT_RETENTION", oldest: "min(last_at)", removable: capped(`chain_rejected_observations where last_at <= ${before}`), seconds: settings.rejectedOutputSeconds },
    {
      table: "cashier_sessions",
      retention: "CASHIER_SESSION_RETENTION (after it ended)",
      oldest: "min(created_at)",
      removable: capped(`cashier_sessions where least(coalesce(revoked_at, expires_at), expires_at) <= ${before}`),
      seconds: settings.cashierSessionSeconds,
    },
    {
      table: "webhook_recoveries",
      retention: "EVENT_RETENTION (after it ended)",
      oldest: "min(created_at)",
      removable: capped(`webhook_recoveries where status <> 'running' and updated_at <= ${before}`),
      seconds: settings.eventSeconds,
    },
    {
      table: "dashboard_sessions",
      retention: "DASHBOARD_SESSION_RETENTION (after it ended)",
      oldest: "min(created_at)",
      removable: capped(`dashboard_sessions where ${dashboardSessionEnded} <= ${before}`),
      seconds: settings.dashboardSessionSeconds,
    },
    {
      table: "dashboard_links",
      retention: "DASHBOARD_SESSION_RETENTION (after used or expired)",
      oldest: "min(created_at)",
      removable: capped(`dashboard_links l where least(coalesce(l.used_at, l.expires_at), l.expires_at) <= ${before} and not exists (select 1 from dashboard_sessions s where s.link_id = l.id)`),
      seconds: settings.dashboardSessionSeconds,
    },
    { table: "payment_intents", retention: "kept (the merchant's records)", oldest: "min(created_at)", removable: null, seconds: 0 },
  ];
  const out: TableReport[] = [];
  for (const r of rows) {
    const removable = r.removable ?? "null::bigint";
    const [row] = await em.execute<{ bytes: string; oldest: Date | null; removable: string | null }[]>(
      // A partitioned table's size is its partitions' (it has none of its own; a plain table has no tree).
      `select greatest(pg_total_relation_size('${r.table}'), (select coalesce(sum(pg_total_relation_size(relid)), 0) from pg_partition_tree('${r.table}'))) as bytes,
              (select ${r.oldest} from ${r.table}) as oldest, ${removable} as removable`,
      paramsOf(removable, r.seconds, 0),
    );
    out.push({
      table: r.table,
      retention: r.seconds > 0 ? `${r.retention}: ${formatSeconds(r.seconds)}` : r.retention,
      bytes: Number(row?.bytes ?? 0),
      oldest: row?.oldest ? new Date(row.oldest) : null,
      removable: row?.removable === null || row?.removable === undefined ? null : Number(row.removable) + (days.rows[r.table as PartitionedTable] ?? 0),
    });
  }
  return out;
}

/** A retention as the settings write it: 90d, 24h, 15m or 60s. */
export function formatSeconds(seconds: number): string {
  for (const [unit, n] of [["d", 86_400], ["h", 3600], ["m", 60]] as const) if (seconds % n === 0) return `${seconds / n}${unit}`;
  return `${seconds}s`;
}
