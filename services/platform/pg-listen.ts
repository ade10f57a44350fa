import { randomUUID } from "node:crypto";
import { setTimeout as sleepFor } from "node:timers/promises";
import pg from "pg";
import type { Logger } from "./logger.ts";
import { nextDelay, OutageLog } from "./outage.ts";

export interface ListenOptions {
  databaseUrl: string;
  channel: string;
  logger: Logger;
  /** Names the connection in the outage log lines. */
  what: string;
  onNotification: (payload: string | undefined) => void;
  /** Called each time LISTEN is in place (again): notifications sent before it were missed. */
  onListening?: () => void;
  /** Called when the connection is lost: notifications may be missed until onListening. */
  onLost?: () => void;
  maxBackoffMs?: number;
  /** Round trips while listening, so that the owner knows how current it is. */
  heartbeat?: Heartbeat;
}

export interface Heartbeat {
  /** A round trip this often. */
  everyMs: number;
  /** A connection that leaves a round trip unanswered this long is ended (and reconnected). */
  timeoutMs: number;
  /**
   * Called after each answered round trip with the time (on performance.now()'s clock) it was
   * sent: every notification committed before then has been passed on. PostgreSQL sends a
   * listener the notifications pending for it ahead of each answer, and a commit marks them
   * pending before its own answer goes out. An owner that stops hearing this (a silent
   * network, a stuck server) knows it may be behind.
   */
  onConfirmed: (sentAt: number) => void;
}

/** Marks a settle()'s notification on a channel; its listeners answer it, and never pass it on. */
const syncPrefix = "sync:";
/** The channel a listener of `channel` answers settle() on. */
const syncedChannel = (channel: string) => `${channel}_synced`;
/** A listener's connection is named after its channel, so that settle() can find every one. */
const listenerName = (channel: string) => `listen ${channel}`.slice(0, 63);

/**
 * A PostgreSQL LISTEN on its own connection, reconnected with capped backoff for as long as it
 * runs; an outage is logged once when it begins and once when it ends. Callers learn when
 * notifications may have been missed (onLost … onListening), since PostgreSQL keeps none for a
 * listener that is not connected. Once listening, it answers settle()'s notifications.
 */
export function listenForever(o: ListenOptions): { stop(): Promise<void> } {
  const maxBackoffMs = o.maxBackoffMs ?? 5000;
  const abort = new AbortController();
  const pause = (ms: number) => sleepFor(ms, undefined, { signal: abort.signal }).catch(() => undefined);
  const outage = new OutageLog(o.logger, o.what);
  let stopped = false;
  // The connection, also while it connects: stop() ends it in any state.
  let client: pg.Client | undefined;

  /** Round trips on `c` until it ends; one left unanswered past the timeout ends it. */
  const beat = async (c: pg.Client, ended: Promise<never>, h: Heartbeat) => {
    try {
      while (!stopped) {
        await Promise.race([pause(h.everyMs), ended]);
        const sentAt = performance.now();
        let timer: NodeJS.Timeout | undefined;
        const late = new Promise<"late">((resolve) => (timer = setTimeout(() => resolve("late"), h.timeoutMs)));
        const answer = await Promise.race([c.query("select 1").then(() => "answered" as const), ended, late]).finally(() => clearTimeout(timer));
        if (answer === "late") {
          if (!stopped) outage.failed(new Error(`no answer to a heartbeat within ${h.timeoutMs} ms`));
          await c.end().catch(() => undefined); // the loop sees it end, and connects again
          return;
        }
        h.onConfirmed(sentAt);
      }
    } catch {
      // The connection ended or broke: the loop handles that.
    }
  };

  const loop = (async () => {
    let failures = 0;
    while (!stopped) {
      const current = new pg.Client({ connectionString: o.databaseUrl });
      client = current;
      // Rejects when the connection breaks or ends, so a lost connection counts as a failure.
      const ended = new Promise<never>((_, reject) => {
        current.on("error", reject);
        current.on("end", () => reject(new Error("the LISTEN connection ended")));
      });
      ended.catch(() => undefined);
      let listening = false;
      try {
        current.on("notification", (n) => {
          // Notifications arrive in commit order, and each is handled before the next: answering
          // a settle() here tells it that every notification committed before it was handled.
          if (n.payload?.startsWith(syncPrefix)) {
            current.query("select pg_notify($1, $2)", [syncedChannel(o.channel), n.payload]).catch(() => undefined);
          } else {
            o.onNotification(n.payload);
          }
        });
        await Promise.race([current.connect(), ended]);
        if (!stopped) {
          await Promise.race([current.query(`listen ${pg.escapeIdentifier(o.channel)}`), ended]);
          // Named only once listening: settle() waits for an answer from every connection so named.
          await Promise.race([current.query(`set application_name = ${pg.escapeLiteral(listenerName(o.channel))}`), ended]);
          listening = true;
          outage.recovered();
          failures = 0;
          o.onListening?.();
          if (o.heartbeat) void beat(current, ended, o.heartbeat);
          await ended;
        }
      } catch (err) {
        if (!stopped) {
          failures++;
          outage.failed(err);
        }
      }
      if (listening) o.onLost?.();
      client = undefined;
      await current.end().catch(() => undefined);
      if (!stopped) await pause(nextDelay(Math.max(failures, 1), 1000, maxBackoffMs));
    }
  })();

  return {
    async stop() {
      stopped = true;
      abort.abort();
      await client?.end().catch(() => undefined);
      await loop;
    },
  };
}

export interface SettleOptions {
  /** How long a listener has to answer before its connection is cut. */
  timeoutMs?: number;
  pollMs?: number;
}

export interface Settled {
  /** The listeners found, each of which answered, went away, or was cut. */
  listeners: number;
  /** The backend pids of the listeners that did not answer in time, whose connections were cut. */
  cut: number[];
}

/**
 * Returns once every listenForever() of `channel`, in any process on this database, has handled
 * every notification committed before the call. Each is sent a notification of its own, which
 * PostgreSQL delivers after those, and answers it. A listener that does not answer in time (a
 * process that is stuck) has its connection cut, so that its owner learns through onLost that
 * it may have missed notifications. Cutting another role's connection needs pg_signal_backend.
 *
 * Its owner may learn that late, or never (a network gone silent). So if any listener did not
 * answer (cut, or its connection gone), settle() returns no sooner than `timeoutMs` after the
 * call: an owner that has had no Heartbeat confirmation for that long knows it may be behind.
 */
export async function settle(databaseUrl: string, channel: string, o: SettleOptions = {}): Promise<Settled> {
  const timeoutMs = o.timeoutMs ?? 5000;
  const pollMs = o.pollMs ?? 200;
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const token = `${syncPrefix}${randomUUID()}`;
    const pending = new Set<number>();
    let answered = () => {};
    client.on("notification", (n) => {
      if (n.payload !== token) return;
      pending.delete(n.processId);
      if (pending.size === 0) answered();
    });
    const listeners = async () =>
      (
        await client.query<{ pid: number }>("select pid from pg_stat_activity where datname = current_database() and application_name = $1", [
          listenerName(channel),
        ])
      ).rows.map((r) => r.pid);
    await client.query(`listen ${pg.escapeIdentifier(syncedChannel(channel))}`);
    const found = await listeners();
    if (found.length === 0) return { listeners: 0, cut: [] };
    for (const pid of found) pending.add(pid);
    const allAnswered = new Promise<void>((resolve) => (answered = resolve));
    await client.query("select pg_notify($1, $2)", [channel, token]);
    const deadline = Date.now() + timeoutMs;
    let gone = 0;
    while (pending.size > 0 && Date.now() < deadline) {
      await Promise.race([allAnswered, sleepFor(Math.min(pollMs, Math.max(deadline - Date.now(), 0)))]);
      if (pending.size === 0) break;
      // A listener whose connection ended answers nothing, and need not be cut.
      const alive = new Set(await listeners());
      for (const pid of pending) {
        if (alive.has(pid)) continue;
        pending.delete(pid);
        gone++;
      }
    }
    const cut = [...pending];
    if (cut.length > 0) await client.query("select pg_terminate_backend(pid) from unnest($1::int[]) as pid", [cut]);
    if (gone > 0) await sleepFor(Math.max(deadline - Date.now(), 0));
    return { listeners: found.length, cut };
  } finally {
    await client.end().catch(() => undefined);
  }
}
