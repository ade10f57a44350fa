import { connect, type NatsConnection } from "@nats-io/transport-node";
import type { Logger } from "./logger.ts";

/**
 * A NATS connection that never blocks start-up: it connects and reconnects
 * in the background, and readiness reports whether it is up.
 */
export class Nats {
  private connection: NatsConnection | undefined;
  private closed = false;

  constructor(url: string, logger: Logger, name: string) {
    void (async () => {
      try {
        const nc = await connect({ servers: url, name, waitOnFirstConnect: true, maxReconnectAttempts: -1, reconnectTimeWait: 500 });
        if (this.closed) {
          await nc.close();
          return;
        }
        this.connection = nc;
        logger.info({ server: nc.getServer() }, "connected to NATS");
      } catch (err) {
        if (!this.closed) logger.error({ err }, "NATS connection failed");
      }
    })();
  }

  get current(): NatsConnection | undefined {
    return this.connection;
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
    await this.connection?.drain().catch(() => undefined);
  }
}
