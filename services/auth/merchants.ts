/**
 * The merchants table's one writer (scripts/table-writers.ts): a merchant is created with its name,
 * and its name and look (logo URL, brand colour) changed here, after the checks of
 * vocabulary/shop-look.ts, whoever asks (the admin CLI, the API, the dashboard through the API).
 */
import type { EntityManager } from "../platform/db.ts";
import { newId } from "../platform/ids.ts";
import { brandColorProblem, logoUrlProblem, nameProblem, type ShopLook } from "../vocabulary/shop-look.ts";

/** A merchant's name as its shoppers and its own staff see it (admin merchant create --name); "" when it has none. */
export async function merchantName(em: EntityManager, merchantId: string): Promise<string> {
  return (await merchantLook(em, merchantId))?.name ?? "";
}

interface MerchantRow {
  id: string;
  name: string;
  logo_url: string | null;
  brand_color: string | null;
  created_at: Date | string;
}

/** A merchant's name and look as pages draw it: absent parts left out. */
export function lookOf(row: { name: string; logo_url: string | null; brand_color: string | null }): ShopLook {
  return { name: row.name, ...(row.logo_url ? { logoUrl: row.logo_url } : {}), ...(row.brand_color ? { brandColor: row.brand_color } : {}) };
}

/** A merchant's name and look; undefined when there is no such merchant. */
export async function merchantLook(em: EntityManager, merchantId: string): Promise<(ShopLook & { id: string; createdAt: Date }) | undefined> {
  const [row] = await em.execute<MerchantRow[]>(`select id, name, logo_url, brand_color, created_at from merchants where id = ?`, [merchantId]);
  return row && { id: row.id, createdAt: new Date(row.created_at), ...lookOf(row) };
}

/** A change refused: which field and why (the caller shapes it as its own error). */
export class MerchantLookError extends Error {
  field: "name" | "logo_url" | "brand_color";
  constructor(field: "name" | "logo_url" | "brand_color", message: string) {
    super(message);
    this.field = field;
  }
}

export async function insertMerchant(em: EntityManager, name: string): Promise<{ id: string; name: string; createdAt: Date }> {
  const problem = nameProblem(name);
  if (problem) throw new MerchantLookError("name", problem);
  const merchant = { id: newId("mer"), name: name.trim(), createdAt: new Date() };
  await em.execute(`insert into merchants (id, name, created_at) values (?, ?, ?)`, [merchant.id, merchant.name, merchant.createdAt]);
  return merchant;
}

/**
 * What a change asks for: a field left undefined stays as it is; "" removes a logo or a colour
 * (a name cannot be removed).
 */
export interface LookChange {
  name?: string;
  logoUrl?: string;
  brandColor?: string;
}

/** Every problem of a change, first one first; nothing is written when there is one. */
export function checkLookChange(change: LookChange): MerchantLookError | undefined {
  if (change.name !== undefined) {
    const problem = nameProblem(change.name);
    if (problem) return new MerchantLookError("name", problem);
  }
  if (change.logoUrl !== undefined && change.logoUrl !== "") {
    const problem = logoUrlProblem(change.logoUrl);
    if (problem) return new MerchantLookError("logo_url", problem);
  }
  if (change.brandColor !== undefined && change.brandColor !== "") {
    const problem = brandColorProblem(change.brandColor);
    if (problem) return new MerchantLookError("brand_color", problem);
  }
  return undefined;
}

/** Changes a merchant's name and look in one statement, after the checks; undefined when there is no such merchant. */
export async function updateMerchantLook(em: EntityManager, merchantId: string, change: LookChange): Promise<(ShopLook & { id: string; createdAt: Date }) | undefined> {
  const refused = checkLookChange(change);
  if (refused) throw refused;
  const sets: string[] = [];
  const values: unknown[] = [];
  if (change.name !== undefined) sets.push("name = ?") && values.push(change.name.trim());
  if (change.logoUrl !== undefined) sets.push("logo_url = ?") && values.push(change.logoUrl === "" ? null : change.logoUrl);
  if (change.brandColor !== undefined) sets.push("brand_color = ?") && values.push(change.brandColor === "" ? null : change.brandColor.toLowerCase());
  if (sets.length === 0) return merchantLook(em, merchantId);
  const [row] = await em.execute<MerchantRow[]>(`update merchants set ${sets.join(", ")} where id = ? returning id, name, logo_url, brand_color, created_at`, [...values, merchantId]);
  return row && { id: row.id, createdAt: new Date(row.created_at), ...lookOf(row) };
}
