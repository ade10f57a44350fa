import type { EntityManager } from "../platform/db.ts";

/** A merchant's name as its shoppers and its own staff see it (admin merchant create --name); "" when it has none. */
export async function merchantName(em: EntityManager, merchantId: string): Promise<string> {
  const [row] = await em.execute<{ name: string }[]>(`select name from merchants where id = ?`, [merchantId]);
  return row?.name ?? "";
}
