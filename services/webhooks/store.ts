import type { Owner } from "../auth/keys.ts";
import type { CursorCodec } from "../platform/cursor.ts";
import type { EntityManager } from "../platform/db.ts";
import { findOwned, pageOwned, type OwnedPage } from "../platform/owned.ts";
import type { EndpointRow } from "./messages.ts";

/** Reads of webhook_endpoints (never its secret column). */

const endpointColumns = `e.id, e.merchant_id, e.environment, e.url, e.description, e.status, e.created_at, e.disabled_at`;

interface DbRow {
  id: string;
  merchant_id: string;
  environment: string;
  url: string;
  description: string | null;
  status: string;
  created_at: Date | string;
  disabled_at: Date | string | null;
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
