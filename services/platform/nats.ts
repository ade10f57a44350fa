import { connect, type NatsConnection } from "@nats-io/transport-node";
import type { Logger } from "./logger.ts";

/**
 * A NATS connection that never blocks start-up: it connects and reconnects
 * in the background, and readiness reports whether it is up.
 */
export class Nats {
  private connection: NatsConnection | undefined;
  private closed = false;
  private settle!: { resolve(nc: NatsConnection): void; reject(err: Error): void };
  /** Resolves with the connection once it is first up; rejects if closed before that. */
  readonly connected: Promise<NatsConnection> = new Promise((resolve, reject) => {
    this.settle = { resolve, reject };
  });

  constructor(url: string, logger: Logger, name: string) {
    this.connected.catch(() => undefined);
    void (async () => {
      try {
        const nc = await connect({ servers: url, name, waitOnFirstConnect: true, maxReconnectAttempts: -1, reconnectTimeWait: 500 });
        if (this.closed) {
          await nc.close();
          return;
        }
        this.connection = nc;
        this.settle.resolve(nc);
        logger.info({ server: nc.getServer() }, "connected to NATS");
      } catch (err) {
        if (!this.closed) logger.error({ err }, "NATS connection failed");
      }
    })();
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
    this.settle.reject(new Error("NATS connection closed"));
    await this.connection?.drain().catch(() => undefined);
  }
}
