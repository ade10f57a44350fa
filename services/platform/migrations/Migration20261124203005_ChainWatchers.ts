import { Migration } from '@mikro-orm/migrations';

export class Migration20261124203005_ChainWatchers extends Migration {

  override name = 'Migration20261124203005_ChainWatchers';

  override up(): void | Promise<void> {
    this.addSql(`create table "chain_watchers" ("network" varchar(32) not null, "environment" varchar(8) not null, "holder" varchar(100) not null, "lease_expires_at" timestamptz(3) not null, "height" bigint null, "recent_blocks" jsonb null, "head_height" bigint null, "head_time" timestamptz(3) null, "saved_at" timestamptz(3) null, primary key ("network", "environment"));`);

    this.addSql(`create index "payment_intents_network_environment_created_at_id_index" on "payment_intents" ("network", "environment", "created_at", "id");`);
  }

  override down(): void | Promise<void> {
    this.addSql(`drop table if exists "chain_watchers" cascade;`);

    this.addSql(`drop index "payment_intents_network_environment_created_at_id_index";`);
  }

}
