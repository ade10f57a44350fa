// Deliveries in the outbox as the service's writers leave them, for tests of the relay
// (services/delivery/relay.ts) against a database migrated with the service's migrations.
import { openDatabase } from "../../services/app/database.ts";
import type { EntityManager } from "../../services/platform/db.ts";
import { newTimedId } from "../../services/platform/ids.ts";
import { ensurePartitions } from "../../services/retention/partitions.ts";
import { createTestDatabase, type Teardown } from "./harness.ts";

/** A test database with the service's migrations and partitions, and the endpoint outboxDeliveries writes for. */
export async function outboxDatabase(t: Teardown) {
  const databaseUrl = await createTestDatabase(t);
  const db = await openDatabase(databaseUrl);
  t.teardown(() => db.close());
  await db.migrator.up();
  await ensurePartitions(db.em.fork());
  const em = () => db.em.fork();
  await seedOutboxEndpoint(em());
  return { databaseUrl, db, em };
}

/** A merchant `mer_a` with one enabled endpoint `we_a`, whose deliveries outboxDeliveries makes. */
export async function seedOutboxEndpoint(em: EntityManager): Promise<void> {
  await em.execute(`insert into merchants (id, name, created_at) values ('mer_a', 'A', now())`);
  await em.execute(
    `insert into webhook_endpoints (id, merchant_id, environment, url, status, secret_ciphertext, created_at) values ('we_a', 'mer_a', 'test', 'https://hooks.example.test/x', 'enabled', '\\x00', now())`,
  );
}

/**
 * `count` deliveries committed as a create in a relay's process commits them: its transaction
 * marked so that the outbox trigger sends no NOTIFY (only its process's wake can tell the relay).
 * `parked`: waiting in the outbox for a due time passed a moment ago (the relay's other loop's lane).
 */
export async function outboxDeliveries(em: EntityManager, count: number, parked = false): Promise<string[]> {
  const at = Array.from({ length: count }, (_, i) => new Date(Date.now() - count + i));
  const events = at.map((d) => newTimedId("evt", d));
  const ids = at.map((d) => newTimedId("wd", d));
  const list = (xs: string[]) => `{${xs.map((x) => `"${x}"`).join(",")}}`;
  await em.transactional(async (tx) => {
    await tx.execute(`select set_config('webhook.outbox_wake', 'caller', true)`);
    await tx.execute(
      `insert into webhook_events (id, merchant_id, environment, type, payload, created_at)
       select e, 'mer_a', 'test', 'webhook.test', '{}', c from unnest(?::text[], ?::timestamptz[]) as x(e, c)`,
      [list(events), list(at.map((d) => d.toISOString()))],
    );
    await tx.execute(
      `insert into webhook_deliveries (id, merchant_id, environment, event_id, endpoint_id, status, attempt_count, next_attempt_at, cause, created_at, updated_at)
       select d, 'mer_a', 'test', e, 'we_a', 'pending', 0, case when ? then now() - interval '1 second' end, 'event', c, c from unnest(?::text[], ?::text[], ?::timestamptz[]) as x(d, e, c)`,
      [parked, list(ids), list(events), list(at.map((d) => d.toISOString()))],
    );
  });
  return ids;
}
