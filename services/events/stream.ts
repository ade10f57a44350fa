import type { Owner } from "../auth/keys.ts";
import type { EntityManager } from "../platform/db.ts";
import { idTime } from "../platform/ids.ts";

/** One recorded event as the stream sends it. */
export interface StreamedEvent {
  id: string;
  type: string;
  createdAt: Date;
  /** The envelope's bytes, as every delivery sends them. */
  payload: string;
}

export interface StreamOptions {
  /** Resume after this event (its id carries its time); unset: from now. */
  after?: string;
  /** Only these types; unset: every type. */
  types?: readonly string[];
  /** Ends the stream. */
  signal: AbortSignal;
  /** How often the log is read for new events (default 250 ms). */
  pollMs?: number;
  /** A keep-alive (null) after this long without an event (default 15 s). */
  keepAliveMs?: number;
}

/**
 * How far back an event may still appear: its created_at is taken before its transaction commits,
 * so one that commits late shows up behind newer ones. The stream looks this far behind what it
 * has sent, and sends what it finds there that it has not sent yet.
 */
export const lateCommitMs = 60_000;
/** How often that look behind is taken. */
const lateCheckMs = 1_000;
/** Events read at once: a backlog (a resume after a pause) is sent a batch at a time. */
const batch = 200;

interface Row {
  id: string;
  type: string;
  payload: string;
  /** created_at in milliseconds (the column has milliseconds; a number compares and builds Dates alike). */
  at: number;
}

const atMs = "(extract(epoch from created_at) * 1000)::float8 as at";
const columns = `id, type, payload, ${atMs}`;

/**
 * The merchant's events of one environment as they are recorded, oldest first, from the log
 * itself (webhook_events): nothing here touches deliveries, endpoints or JetStream, so a reader,
 * however slow, holds up nothing else. Yields null as a keep-alive. Events are ordered by
 * (created_at, id), the order of their ids; one committed late is sent when found, after newer ones.
 */
export async function* recordedEvents(em: EntityManager, owner: Owner, o: StreamOptions): AsyncGenerator<StreamedEvent | null> {
  const pollMs = o.pollMs ?? 250;
  const keepAliveMs = o.keepAliveMs ?? 15_000;
  const started = Date.now();
  const afterTime = o.after === undefined ? undefined : idTime(o.after)?.getTime();
  // The last event sent, in the stream's order; from now, nothing before the stream began.
  let cursor = afterTime === undefined ? { at: started, id: "" } : { at: afterTime, id: o.after as string };
  // How far back late commits are looked for.
  const floor = (afterTime ?? started) - lateCommitMs;
  const sent = new Map<string, number>();
  const typeFilter = o.types && o.types.length > 0 ? { sql: " and type = any(?::text[])", params: [`{${o.types.join(",")}}`] } : { sql: "", params: [] };
  const where = `merchant_id = ? and environment = ?${typeFilter.sql}`;
  const whereParams = [owner.merchantId, owner.environment, ...typeFilter.params];
  if (afterTime === undefined) {
    // From now: what is committed with a created_at before the start is the past; a late commit
    // stamped before the start that commits from here on is sent, as is everything stamped after.
    const past = await em.execute<{ id: string; at: number }[]>(
      `select id, ${atMs} from webhook_events where ${where} and created_at >= ? and created_at < ?`,
      [...whereParams, new Date(floor), new Date(started)],
    );
    for (const row of past) sent.set(row.id, row.at);
  } else {
    // A resume: the event resumed after was the caller's. Others of the minute before it may come
    // again (a late commit cannot be told from one the caller had): the caller skips ids it has.
    sent.set(o.after as string, afterTime);
  }
  let lastSent = Date.now();
  let lastLateCheck = 0;

  while (!o.signal.aborted) {
    const fresh = await em.execute<Row[]>(
      `select ${columns} from webhook_events
        where ${where} and created_at >= ? and (created_at, id) > (?, ?)
        order by created_at, id limit ${batch}`,
      [...whereParams, new Date(cursor.at), new Date(cursor.at), cursor.id],
    );
    for (const row of fresh) {
      cursor = { at: row.at, id: row.id };
      if (sent.has(row.id)) continue;
      sent.set(row.id, cursor.at);
      lastSent = Date.now();
      yield view(row);
      if (o.signal.aborted) return;
    }
    if (fresh.length === batch) continue;

    if (Date.now() - lastLateCheck >= lateCheckMs) {
      lastLateCheck = Date.now();
      const since = Math.max(floor, cursor.at - lateCommitMs);
      const behind = await em.execute<{ id: string }[]>(
        `select id from webhook_events where ${where} and created_at >= ? and (created_at, id) <= (?, ?) order by created_at, id`,
        [...whereParams, new Date(since), new Date(cursor.at), cursor.id],
      );
      const missing = behind.map((r) => r.id).filter((id) => !sent.has(id));
      if (missing.length > 0) {
        const rows = await em.execute<Row[]>(
          `select ${columns} from webhook_events where id = any(?::text[]) and created_at >= ? order by created_at, id`,
          [`{${missing.join(",")}}`, new Date(since)],
        );
        for (const row of rows) {
          sent.set(row.id, row.at);
          lastSent = Date.now();
          yield view(row);
          if (o.signal.aborted) return;
        }
      }
      for (const [id, at] of sent) if (at < cursor.at - lateCommitMs) sent.delete(id);
    }

    if (Date.now() - lastSent >= keepAliveMs) {
      lastSent = Date.now();
      yield null;
    }
    await pause(pollMs, o.signal);
  }
}

function view(row: Row): StreamedEvent {
  return { id: row.id, type: row.type, createdAt: new Date(row.at), payload: row.payload };
}

function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
  });
}
