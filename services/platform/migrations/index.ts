import type { MigrationObject } from "@mikro-orm/core";
import { Migration20261121074008_initial } from "./Migration20261121074008_initial.ts";

/** Every migration, in order. `npm run migration:create` writes a new file; add it here. */
export const migrations: MigrationObject[] = [{ name: "Migration20261121074008_initial", class: Migration20261121074008_initial }];
