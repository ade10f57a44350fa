import { hostname } from "node:os";
import type { EntityManager } from "../platform/db.ts";
import type { Logger } from "../platform/logger.ts";
import { issueInProcessWatcherCredential, removeExpiredInProcessWatcherCredentials, renewInternalCredential, revokeInternalCredentials } from "./admin.ts";
import type { Environment } from "./keys.ts";

export interface WatcherCredentialOptions {
  /** How long a credential is valid unless renewed (default 10 minutes). */
  lifetimeMs?: number;
  /** How often a running process renews its credentials (default every minute). */
  renewEveryMs?: number;
  /** How long an expired credential is kept before a start deletes it (default a day). */
  keepExpiredMs?: number;
  /** Names this process in the credentials' names (default `<hostname>-<pid>`). */
  processName?: string;
}

/**
 * The credentials of a watcher that runs beside the rpc role, one per environment, of this
 * process alone: no start revokes another process's, so replicas of the all-in-one service
 * (`npm start` on several machines) do not switch each other's watcher off.
 *
 * Each expires within `lifetimeMs` unless renewed; this process renews them every
 * `renewEveryMs` while it runs, and revoke() (at a clean stop, once the watcher has stopped)
 * revokes them. A process that dies leaves credentials that expire on their own; a start
 * deletes those that expired over `keepExpiredMs` ago. A renewal that fails (the database
 * briefly away) is logged once and tried again at the next period; no secret is ever logged.
 */
export class InProcessWatcherCredentials {
  readonly #em: () => EntityManager;
  readonly #logger: Logger;
  readonly #lifetimeMs: number;
  readonly #renewEveryMs: number;
  readonly #keepExpiredMs: number;
  readonly processName: string;
  readonly #issued: { id: string; name: string; environment: Environment }[] = [];
  /** Credentials found revoked or deleted at a renewal (by an operator): said once. */
  readonly #lost = new Set<string>();
  #timer: NodeJS.Timeout | undefined;
  #renewing: Promise<void> | undefined;
  #failing = false;
  #stopped = false;

  constructor(em: () => EntityManager, logger: Logger, o: WatcherCredentialOptions = {}) {
    this.#em = em;
    this.#logger = logger;
    this.#lifetimeMs = o.lifetimeMs ?? 10 * 60_000;
    this.#renewEveryMs = o.renewEveryMs ?? 60_000;
    this.#keepExpiredMs = o.keepExpiredMs ?? 24 * 3600_000;
    this.processName = o.processName ?? `${hostname().slice(0, 150)}-${process.pid}`;
  }

  /**
   * Issues this process's credential for `environment`, scoped to `networks` (the chains its
   * watcher follows there: it may claim and report on those alone), and returns its secret (to be
   * sent in-process only).
   */
  async issue(environment: Environment, networks: readonly string[]): Promise<string> {
    if (this.#stopped) throw new Error("the in-process watcher's credentials were revoked: this process is stopping");
    const first = this.#issued.length === 0;
    const issued = await this.#em().transactional(async (tx) => {
      if (first) {
        const removed = await removeExpiredInProcessWatcherCredentials(tx, new Date(Date.now() - this.#keepExpiredMs));
        if (removed > 0) this.#logger.info({ removed }, "deleted expired credentials of in-process watchers");
      }
      return issueInProcessWatcherCredential(tx, environment, this.processName, new Date(Date.now() + this.#lifetimeMs), networks);
    });
    this.#issued.push({ id: issued.id, name: issued.name, environment });
    this.#logger.info({ credential: issued.id, name: issued.name, expires_at: issued.expiresAt.toISOString() }, "issued the in-process watcher's credential");
    if (this.#timer === undefined) {
      this.#timer = setInterval(() => void this.renew(), this.#renewEveryMs);
      this.#timer.unref();
    }
    return issued.credential;
  }

  /** Moves each credential's expiry to a full lifetime from now (one renewal at a time); never throws. */
  renew(): Promise<void> {
    return (this.#renewing ??= this.#renewOnce().finally(() => (this.#renewing = undefined)));
  }

  async #renewOnce(): Promise<void> {
    if (this.#stopped) return;
    const expiresAt = new Date(Date.now() + this.#lifetimeMs);
    try {
      const em = this.#em();
      for (const c of this.#issued) {
        if (this.#lost.has(c.id)) continue;
        if (await renewInternalCredential(em, c.id, expiresAt)) continue;
        this.#lost.add(c.id);
        this.#logger.warn({ credential: c.id, name: c.name }, "the in-process watcher's credential was revoked or deleted; the watcher is refused until this process restarts");
      }
      if (this.#failing) {
        this.#failing = false;
        this.#logger.info({ expires_at: expiresAt.toISOString() }, "renewed the in-process watcher's credential again");
      }
    } catch (err) {
      // Once per outage; the next period tries again, and the credential lasts a lifetime from the last renewal.
      if (!this.#failing) {
        this.#failing = true;
        this.#logger.warn({ reason: (err as Error).message.split("\n")[0], retry_ms: this.#renewEveryMs }, "could not renew the in-process watcher's credential; retrying");
      }
    }
  }

  /**
   * Stops renewing and revokes every credential issued (call once the watcher has stopped, while
   * the database is still open). One that cannot be revoked (the database away) is logged, and
   * expires on its own; never throws.
   */
  async revoke(): Promise<void> {
    this.#stopped = true;
    if (this.#timer !== undefined) clearInterval(this.#timer);
    await this.#renewing;
    if (this.#issued.length === 0) return;
    try {
      await revokeInternalCredentials(this.#em(), this.#issued.map((c) => c.id));
    } catch (err) {
      this.#logger.warn(
        { credentials: this.#issued.map((c) => c.id), reason: (err as Error).message.split("\n")[0] },
        "could not revoke the in-process watcher's credentials at stop; they expire on their own",
      );
    }
  }
}
