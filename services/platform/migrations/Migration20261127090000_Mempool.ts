import { Migration } from '@mikro-orm/migrations';

export class Migration20261127090000_Mempool extends Migration {

  override name = 'Migration20261127090000_Mempool';

  override up(): void | Promise<void> {
    // An output seen in the node's mempool (no block yet), and whether its transaction signals BIP 125.
    this.addSql(`alter table "chain_observations" add column "mempool" boolean not null default false, add column "replaceable" boolean not null default false;`);
    this.addSql(`create index "chain_observations_mempool_index" on "chain_observations" ("network", "environment") where "mempool" and not "orphaned";`);
    // When the intent first saw funds that do not count yet (payment.detected, once).
    this.addSql(`alter table "payment_intents" add column "detected_at" timestamptz(3) null;`);
  }

  override down(): void | Promise<void> {
    this.addSql(`alter table "payment_intents" drop column "detected_at";`);
    this.addSql(`drop index "chain_observations_mempool_index";`);
    this.addSql(`alter table "chain_observations" drop column "mempool", drop column "replaceable";`);
  }

}
