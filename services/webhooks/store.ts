import type { Owner } from "../auth/keys.ts";
import type { CursorCodec } from "../platform/cursor.ts";
import type { EntityManager } from "../platform/db.ts";
import { apiError } from "../platform/errors.ts";
import { findOwned, pageOwned, type OwnedPage } from "../platform/owned.ts";
import { maxEnabledEndpoints } from "../vocabulary/limits.ts";
import type { EndpointRow } from "./messages.ts";

/** Reads of webhook_endpoints (never its secret column). */

const endpointColumns = `e.id, e.merchant_id, e.environment, e.url, e.description, e.status, e.created_at, e.disabled_at, e.enabled_events`;

interface DbRow {
  id: string;
  merchant_id: string;
  environment: string;
  url: string;
  description: string | null;
  status: string;
  created_at: Date | string;
  disabled_at: Date | string | null;
  enabled_events: string[];
}

function fromDb(r: DbRow): EndpointRow {
  return {
    id: r.id,
    environment: r.environment,
    url: r.url,
    description: r.description,
    status: r.status,
    createdAt: new Date(r.created_at),
    disabledAt: r.disabled_at ? new Date(r.disabled_at) : null,
    enabledEvents: r.enabled_events,
  };
}

export async function findEndpoint(em: EntityManager, owner: Owner, id: string, lock = false): Promise<EndpointRow | undefined> {
  const row = await findOwned<DbRow>(em, `select ${endpointColumns} from webhook_endpoints e where e.id = ?`, id, owner, lock);
  return row && fromDb(row);
}

export async function listEndpoints(
  em: EntityManager,
  cursors: CursorCodec,
  owner: Owner,
  page: { cursor: string | undefined; limit: number; binding: string },
): Promise<OwnedPage<EndpointRow>> {
  const result = await pageOwned<DbRow>(em, cursors, { select: `select ${endpointColumns} from webhook_endpoints e`, alias: "e", owner, filters: [], ...page });
  return { ...result, rows: result.rows.map(fromDb) };
}

/**
 * Refuses one more enabled endpoint of a merchant and environment over the cap (a create, or an
 * operator enabling one again). It locks the merchant's row first, which serialises these for one
 * merchant so the count sees every committed one and the cap holds; "no key update" leaves inserts
 * that reference the merchant (intents, events) free to run meanwhile.
 */
export async function checkEnabledCap(tx: EntityManager, merchantId: string, environment: string): Promise<void> {
  await tx.execute(`select id from merchants where id = ? for no key update`, [merchantId]);
  const [{ n } = { n: "0" }] = await tx.execute<{ n: string }[]>(
    `select count(*) as n from webhook_endpoints where merchant_id = ? and environment = ? and status = 'enabled'`,
    [merchantId, environment],
  );
  if (Number(n) >= maxEnabledEndpoints) throw apiError("invalid_state", `At most ${maxEnabledEndpoints} endpoints can be enabled; disable one first.`);
}

/** A merchant's webhook endpoints counted by environment and status, as "<status>_webhook_endpoints" (the admin CLI's merchant show). */
/** Every endpoint of a merchant, both environments, newest first: what `admin merchant show` lists. */
export async function merchantEndpoints(em: EntityManager, merchantId: string): Promise<EndpointRow[]> {
  const rows = await em.execute<DbRow[]>(`select ${endpointColumns} from webhook_endpoints e where e.merchant_id = ? order by e.created_at desc, e.id desc`, [merchantId]);
  return rows.map(fromDb);
}

/**
 * Changes an endpoint's description (null clears it) and event types, each only when given; the
 * endpoint as it is now, or undefined when the owner has no such endpoint. The filter applies to
 * events recorded from then on (events/record.ts reads it as each event is recorded).
 */
export async function updateEndpoint(em: EntityManager, owner: Owner, id: string, change: { description?: string | null; enabledEvents?: string[] }): Promise<EndpointRow | undefined> {
  const sets: string[] = [];
  const params: unknown[] = [];
  if (change.description !== undefined) {
    sets.push("description = ?");
    params.push(change.description);
  }
  if (change.enabledEvents !== undefined) {
    sets.push("enabled_events = ?::text[]");
    params.push(`{${change.enabledEvents.join(",")}}`);
  }
  if (sets.length > 0) {
    await em.execute(`update webhook_endpoints set ${sets.join(", ")} where id = ? and merchant_id = ? and environment = ?`, [...params, id, owner.merchantId, owner.environment]);
  }
  return findEndpoint(em, owner, id);
}
