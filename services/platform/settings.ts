import { defineEntity, p, type InferEntity } from "@mikro-orm/core";
import type { EntityManager } from "./db.ts";
import { randomBase62 } from "./ids.ts";

/** Facts about this installation, kept in its own database (name → value). */
export const PlatformSetting = defineEntity({
  name: "PlatformSetting",
  tableName: "platform_settings",
  properties: {
    name: p.string().length(64).primary(),
    value: p.string().length(256),
    createdAt: p.datetime().length(3),
  },
});
export type PlatformSetting = InferEntity<typeof PlatformSetting>;

/**
 * This installation's id: made on first use and kept in its database, so every process on the
 * same database shares it, and another database (another installation) has another.
 */
export async function installationId(em: EntityManager): Promise<string> {
  const rows = await em.execute<{ value: string }[]>(
    `with made as (
       insert into platform_settings (name, value, created_at) values ('installation_id', ?, now())
       on conflict (name) do nothing returning value
     )
     select value from made union all select value from platform_settings where name = 'installation_id'`,
    [randomBase62(10)],
  );
  if (rows[0]) return rows[0].value;
  // Another process inserted it while this statement ran: the insert waited for it, but the
  // statement's snapshot predates it. A new statement sees it.
  const [made] = await em.execute<{ value: string }[]>(`select value from platform_settings where name = 'installation_id'`);
  if (!made) throw new Error("installation_id is missing after its insert");
  return made.value;
}

/**
 * Records `value` under `name` in this installation's database; true the first time it holds that
 * value (never recorded, or recorded with another), false when it already did. For what is worth
 * saying once per installation rather than at every start.
 */
export async function recordOnce(em: EntityManager, name: string, value: string): Promise<boolean> {
  const rows = await em.execute<{ name: string }[]>(
    `insert into platform_settings (name, value, created_at) values (?, ?, now())
     on conflict (name) do update set value = excluded.value, created_at = excluded.created_at
       where platform_settings.value is distinct from excluded.value
     returning name`,
    [name, value],
  );
  return rows.length > 0;
}
