import { connect, type NatsConnection } from "@nats-io/transport-node";
import type { Logger } from "./logger.ts";

/**
 * NATS_URL's servers: one, or a cluster's, comma-separated (config.ts has checked each). The client
 * learns the cluster's other servers from whichever answers, and moves to another on a loss.
 */
export function natsServers(url: string): string[] {
  return url
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");
}

/**
 * A NATS connection that never blocks start-up: it connects and reconnects
 * in the background (to any server of the list, or of the cluster it learns),
 * and readiness reports whether it is up.
 */
export class Nats {
  private connection: NatsConnection | undefined;
  private closed = false;
  /** Ends the wait between first-connection attempts (close() calls it). */
  private wake: () => void = () => undefined;
  private settle!: { resolve(nc: NatsConnection): void; reject(err: Error): void };
  /** Resolves with the connection once it is first up; rejects if closed before that. */
  readonly connected: Promise<NatsConnection> = new Promise((resolve, reject) => {
    this.settle = { resolve, reject };
  });

  constructor(url: string, logger: Logger, name: string) {
    this.connected.catch(() => undefined);
    void (async () => {
      // Our own loop for the first connection, not the client's waitOnFirstConnect: that one goes
      // on trying after close(), and would keep a stopped process alive while NATS is away.
      let failures = 0;
      while (!this.closed) {
        try {
          // noAsyncTraces: the client would otherwise build two Error objects (stack traces) for every
          // request, i.e. every JetStream publish and pull, whether it fails or not; our logs name
          // the operation that failed themselves.
          const nc = await connect({ servers: natsServers(url), name, maxReconnectAttempts: -1, reconnectTimeWait: 500, noAsyncTraces: true });
          if (this.closed) {
            await nc.close();
            return;
          }
          this.connection = nc;
          this.settle.resolve(nc);
          logger.info({ server: nc.getServer(), cluster: nc.info?.cluster }, "connected to NATS");
          void watch(nc, logger);
          return;
        } catch (err) {
          if (this.closed) return;
          if (failures++ === 0) logger.error({ err }, "NATS connection failed; retrying");
          await new Promise<void>((resolve) => {
            this.wake = resolve;
            setTimeout(resolve, 500);
          });
        }
      }
    })();
  }

  /** The server this process is connected to now (host:port), if any. */
  server(): string | undefined {
    const nc = this.connection;
    return nc && !nc.isClosed() ? nc.getServer() : undefined;
  }

  async ready(timeoutMs = 1000): Promise<boolean> {
    const nc = this.connection;
    if (!nc || nc.isClosed()) return false;
    try {
      await Promise.race([nc.flush(), new Promise((_, reject) => setTimeout(reject, timeoutMs))]);
      return true;
    } catch {
      return false;
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    this.wake();
    this.settle.reject(new Error("NATS connection closed"));
    await this.connection?.drain().catch(() => undefined);
  }
}

/** A lost server and the move to another are worth a line each; the rest is the client's business. */
async function watch(nc: NatsConnection, logger: Logger): Promise<void> {
  try {
    for await (const s of nc.status()) {
      if (s.type === "disconnect") logger.warn({ server: s.server }, "NATS server connection lost; reconnecting");
      else if (s.type === "reconnect") logger.info({ server: s.server }, "reconnected to NATS");
      else if (s.type === "ldm") logger.info({ server: s.server }, "NATS server entering lame duck mode");
    }
  } catch {
    // The connection closed.
  }
}
