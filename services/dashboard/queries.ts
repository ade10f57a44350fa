/**
 * The dashboard's reads that the merchant API has no route for, each scoped by the caller's
 * merchant and environment like every query: another merchant's intent is simply not there.
 */
import { eventKept } from "../events/retention.ts";
import type { Owner } from "../auth/keys.ts";
import type { EntityManager } from "../platform/db.ts";

/** At most this many intents answer a search. */
const searchLimit = 20;

/** Intents paid to this deposit address, or by this transaction, newest first. */
export async function searchIntents(em: EntityManager, owner: Owner, query: string): Promise<string[]> {
  const rows = await em.execute<{ id: string }[]>(
    `select i.id from payment_intents i
      where i.merchant_id = ? and i.environment = ?
        and (i.deposit_address = ?
             or exists (select 1 from chain_observations o where o.payment_intent_id = i.id and o.tx_hash = ?))
      order by i.created_at desc, i.id desc limit ${searchLimit}`,
    [owner.merchantId, owner.environment, query, query],
  );
  return rows.map((r) => r.id);
}

/**
 * The exception badge's reasons for each of the given intents that has one: its status
 * (underpaid, overpaid, late), a payment that never counts (payment.exception: another asset;
 * recorded after a cancellation; and, once told, paid after the late-payment window), or a
 * payment its chain took back in a reorganisation (an orphaned output that had been in a block).
 */
export async function intentExceptions(em: EntityManager, owner: Owner, ids: readonly string[]): Promise<{ publicId: string; reasons: string[] }[]> {
  // Only the id shape newId("pi") makes goes into the array literal.
  const wanted = ids.filter((id) => /^pi_[0-9A-Za-z]{24}$/.test(id));
  // An output of another of the intent's payment methods (funds.ts otherPayment).
  const anotherMethod = `coalesce(i.methods @> jsonb_build_array(jsonb_build_object('network', o.network, 'asset', o.asset)), false)`;
  if (wanted.length === 0) return [];
  const rows = await em.execute<{ id: string; status: string; wrong_asset: boolean; other_method: boolean; intent_cancelled: boolean; after_late_window: boolean; reorged: boolean }[]>(
    `select i.id, i.status,
            coalesce(bool_or((o.asset <> i.asset or o.network <> i.network) and not ${anotherMethod}), false) as wrong_asset,
            coalesce(bool_or((o.asset <> i.asset or o.network <> i.network) and ${anotherMethod}), false) as other_method,
            coalesce(bool_or(o.asset = i.asset and o.network = i.network and i.status = 'cancelled' and o.created_at > coalesce(i.cancelled_at, i.expires_at)), false) as intent_cancelled,
            coalesce(bool_or(o.asset = i.asset and o.network = i.network and i.status <> 'cancelled' and o.exception_reported_at is not null), false) as after_late_window,
            coalesce(bool_or(o.orphaned and o.block_hash is not null), false) as reorged
       from payment_intents i left join chain_observations o on o.payment_intent_id = i.id
      where i.merchant_id = ? and i.environment = ? and i.id = any(?::text[])
      group by i.id, i.status`,
    [owner.merchantId, owner.environment, `{${wanted.join(",")}}`],
  );
  const byStatus = new Set(["underpaid", "overpaid", "late"]);
  return rows.flatMap((r) => {
    const flagged = (["wrong_asset", "other_method", "intent_cancelled", "after_late_window", "reorged"] as const).filter((k) => r[k]);
    const reasons = [...(byStatus.has(r.status) ? [r.status] : []), ...flagged];
    return reasons.length === 0 ? [] : [{ publicId: r.id, reasons }];
  });
}

/** An intent's events kept under EVENT_RETENTION, oldest first, each with its data as delivered; undefined when the intent is not the owner's. */
export async function intentEvents(
  em: EntityManager,
  owner: Owner,
  publicId: string,
  retentionSeconds: number,
): Promise<{ id: string; type: string; createdAt: string; data: Record<string, never> }[] | undefined> {
  const [intent] = await em.execute<{ id: string }[]>(`select id from payment_intents where id = ? and merchant_id = ? and environment = ?`, [publicId, owner.merchantId, owner.environment]);
  if (!intent) return undefined;
  const rows = await em.execute<{ id: string; type: string; created_at: Date | string; payload: string }[]>(
    `select id, type, created_at, payload from webhook_events ev
      where payment_intent_id = ? and merchant_id = ? and environment = ? and ${eventKept("ev", retentionSeconds)} order by created_at, id`,
    [publicId, owner.merchantId, owner.environment],
  );
  return rows.map((r) => ({ id: r.id, type: r.type, createdAt: new Date(r.created_at).toISOString(), data: (JSON.parse(r.payload) as { data?: Record<string, never> }).data ?? {} }));
}
