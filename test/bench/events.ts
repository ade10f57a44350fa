import type { Socket } from "node:net";
import pg from "pg";
import { newTimedIds } from "../../services/platform/ids.ts";
import { nowMs } from "./stats.ts";

/**
 * Records events for the delivery benchmarks straight into the outbox, as a state
 * change's transaction leaves them: each event (its bytes written once) and one
 * pending delivery to the endpoint, in one transaction, one statement per batch.
 * (recordEvent does the same per event; doing it in bulk keeps the producer from
 * being what is measured.) The insert trigger wakes the relay at commit.
 */
export class EventProducer {
  private readonly pool: pg.Pool;
  private readonly merchantId: string;
  private readonly endpointId: string;

  /** The local ports of the pool's connections, which name its PostgreSQL backends (backendsOf). */
  readonly ports = new Set<number>();

  constructor(databaseUrl: string, merchantId: string, endpointId: string) {
    this.pool = new pg.Pool({ connectionString: databaseUrl, max: 4 });
    this.pool.on("connect", (client) => {
      const port = (client as unknown as { connection: { stream: Socket } }).connection.stream.localPort;
      if (port !== undefined) this.ports.add(port);
    });
    this.merchantId = merchantId;
    this.endpointId = endpointId;
  }

  /**
   * `deliveries` names the table the deliveries go to: webhook_deliveries (the service's outbox), or
   * the durable raw worker's table of the same shape (the drain's baseline: same events, same rows).
   */
  async record(count: number, deliveries = "webhook_deliveries"): Promise<{ ids: string[]; committedAt: number }> {
    // Ids as the service makes them: carrying their created_at (the partition of their day).
    const at = new Date();
    const ids = newTimedIds("evt", at, count);
    const createdAt = at.toISOString();
    const payloads = ids.map((id) =>
      JSON.stringify({ id, type: "webhook.test", created_at: createdAt, data: { test: { synthetic: true, environment: "test", endpoint_id: this.endpointId } } }),
    );
    const deliveryIds = newTimedIds("wd", at, count);
    await this.pool.query(
      `with ev as (
         insert into webhook_events (id, merchant_id, environment, type, payload, created_at)
         select id, $1, 'test', 'webhook.test', payload, $4 from unnest($2::text[], $3::text[]) as t(id, payload)
         returning id
       )
       insert into ${deliveries} (id, merchant_id, environment, event_id, endpoint_id, status, attempt_count, created_at, updated_at)
       select d.id, $1, 'test', d.event_id, $5, 'pending', 0, $4, $4 from unnest($6::text[], $2::text[]) as d(id, event_id)`,
      [this.merchantId, ids, payloads, createdAt, this.endpointId, deliveryIds],
    );
    return { ids, committedAt: nowMs() };
  }

  /**
   * When each event's first attempt passed the pipeline's stages, as the service recorded them:
   * picked up (published_at is the start of the relay's statement or transaction that took it: now()) and
   * the attempt's start (its worker claimed it and is about to send). Wall-clock ms, as nowMs.
   */
  async stages(ids: readonly string[]): Promise<Map<string, { pickedUp: number; started: number }>> {
    const { rows } = await this.pool.query<{ event_id: string; picked_up: string; started: string }>(
      `select d.event_id, extract(epoch from d.published_at) * 1000 as picked_up, extract(epoch from a.started_at) * 1000 as started
         from webhook_deliveries d join webhook_attempts a on a.delivery_id = d.id and a.number = 1
        where d.event_id = any($1::text[])`,
      [ids],
    );
    return new Map(rows.map((r) => [r.event_id, { pickedUp: Number(r.picked_up), started: Number(r.started) }]));
  }

  close(): Promise<void> {
    return this.pool.end();
  }
}
