import type { EntityManager } from "../platform/db.ts";
import { assets } from "../vocabulary/assets.ts";

/** Reads of QR configurations, and what their stored network/asset columns mean. */

/** The id shape newId("qr") makes: anything else cannot be a QR configuration, and is never looked up. */
export const qrIdPattern = /^qr_[0-9A-Za-z]{24}$/;

export interface AcceptedPair {
  network: string;
  asset: string;
}

/** The pairs a configuration accepts: every supported pair, a network's pairs, or the one pair. */
export function acceptedPairs(network: string | null, asset: string | null): AcceptedPair[] {
  return assets
    .filter((a) => (network === null || a.network === network) && (asset === null || a.asset === asset))
    .map((a) => ({ network: a.network, asset: a.asset }));
}

/** An active configuration with the public facts of its merchant. */
export interface PublicQrRow {
  id: string;
  environment: string;
  label: string;
  network: string | null;
  asset: string | null;
  amount: string | null;
  merchantName: string;
}

/** The active (not disabled) configuration with this id, or undefined. One indexed lookup (primary key). */
export async function findActiveQr(em: EntityManager, id: string): Promise<PublicQrRow | undefined> {
  const [row] = await em.execute<
    { id: string; environment: string; label: string; network: string | null; asset: string | null; amount: string | null; merchant_name: string }[]
  >(
    `select q.id, q.environment, q.label, q.network, q.asset, q.amount::text as amount, m.name as merchant_name
       from qr_configurations q join merchants m on m.id = q.merchant_id
      where q.id = ? and q.disabled_at is null`,
    [id],
  );
  if (!row) return undefined;
  return {
    id: row.id,
    environment: row.environment,
    label: row.label,
    network: row.network,
    asset: row.asset,
    amount: row.amount,
    merchantName: row.merchant_name,
  };
}
