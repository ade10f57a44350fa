import { Migration } from '@mikro-orm/migrations';

export class Migration20261126094500_RejectedObservations extends Migration {

  override name = 'Migration20261126094500_RejectedObservations';

  override up(): void | Promise<void> {
    this.addSql(`create table "chain_rejected_observations" ("network" varchar(32) not null, "environment" varchar(8) not null, "tx_hash" varchar(200) not null, "output_index" int not null, "asset" varchar(32) not null, "to_address" varchar(200) not null, "amount" varchar(200) not null, "block_hash" varchar(200) null, "reason" varchar(500) not null, "first_at" timestamptz(3) not null, "last_at" timestamptz(3) not null, "reports" int not null default 1, primary key ("network", "environment", "tx_hash", "output_index"));`);
  }

  override down(): void | Promise<void> {
    this.addSql(`drop table if exists "chain_rejected_observations" cascade;`);
  }

}
