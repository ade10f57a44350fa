import { AdminError } from "../auth/admin.ts";
import { CashierSession, Merchant } from "../auth/entities.ts";
import { generateCashierSession, hashApiKey, keyHint, type Environment } from "../auth/keys.ts";
import type { EntityManager } from "../platform/db.ts";
import { newId } from "../platform/ids.ts";

/** Cashier sessions for the point-of-sale terminal (admin CLI): issued, listed, revoked. */

export const ttlMinutes = { min: 1, max: 7 * 24 * 60, default: 720 } as const;

/** A cashier's name or a terminal's label: 1 to 100 printable characters. */
export function checkLabel(option: string, value: string): string {
  const trimmed = value.trim();
  if (trimmed.length === 0 || [...trimmed].length > 100 || /\p{Cc}/u.test(trimmed)) {
    throw new AdminError(`--${option} must be 1 to 100 printable characters`);
  }
  return trimmed;
}

export async function createCashierSession(
  em: EntityManager,
  o: { merchantId: string; environment: Environment; cashier: string; terminal?: string; ttlMinutes?: number },
) {
  const merchant = await em.findOne(Merchant, { id: o.merchantId });
  if (!merchant) throw new AdminError(`no merchant ${o.merchantId}`);
  const ttl = o.ttlMinutes ?? ttlMinutes.default;
  if (!Number.isInteger(ttl) || ttl < ttlMinutes.min || ttl > ttlMinutes.max) {
    throw new AdminError(`--ttl-minutes must be a whole number from ${ttlMinutes.min} to ${ttlMinutes.max}`);
  }
  const secret = generateCashierSession(o.environment);
  const now = new Date();
  const row = {
    id: newId("cs"),
    merchant: o.merchantId,
    environment: o.environment,
    cashier: checkLabel("cashier", o.cashier),
    terminal: o.terminal === undefined ? null : checkLabel("terminal", o.terminal),
    secretHash: hashApiKey(secret),
    hint: keyHint(secret),
    createdAt: now,
    expiresAt: new Date(now.getTime() + ttl * 60_000),
    revokedAt: null,
  };
  await em.insert(CashierSession, row);
  return {
    id: row.id,
    merchant: o.merchantId,
    environment: o.environment,
    cashier: row.cashier,
    terminal: row.terminal,
    session: secret,
    expires_at: row.expiresAt.toISOString(),
  };
}

export async function revokeCashierSession(em: EntityManager, id: string) {
  const row = await em.findOne(CashierSession, { id });
  if (!row) throw new AdminError(`no cashier session ${id}`);
  const revokedAt = row.revokedAt ?? new Date();
  if (!row.revokedAt) await em.nativeUpdate(CashierSession, { id }, { revokedAt });
  return { id, hint: row.hint, revoked_at: revokedAt.toISOString() };
}

/** A merchant's sessions, newest first: hints only, never the secret. */
export async function listCashierSessions(em: EntityManager, merchantId: string) {
  const merchant = await em.findOne(Merchant, { id: merchantId });
  if (!merchant) throw new AdminError(`no merchant ${merchantId}`);
  const rows = await em.find(CashierSession, { merchant: merchantId }, { orderBy: { createdAt: "desc" } });
  const now = Date.now();
  return rows.map((r) => ({
    id: r.id,
    environment: r.environment,
    cashier: r.cashier,
    terminal: r.terminal,
    hint: r.hint,
    created_at: r.createdAt.toISOString(),
    expires_at: r.expiresAt.toISOString(),
    revoked_at: r.revokedAt?.toISOString() ?? null,
    state: r.revokedAt ? "revoked" : r.expiresAt.getTime() <= now ? "expired" : "active",
  }));
}
