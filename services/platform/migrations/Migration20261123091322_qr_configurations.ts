import { Migration } from '@mikro-orm/migrations';

export class Migration20261123091322_qr_configurations extends Migration {

  override name = 'Migration20261123091322_qr_configurations';

  override up(): void | Promise<void> {
    this.addSql(`create table "qr_configurations" ("id" varchar(255) not null, "merchant_id" varchar(255) not null, "environment" varchar(4) not null, "label" varchar(100) not null, "network" varchar(32) null, "asset" varchar(16) null, "amount" numeric null, "created_at" timestamptz(3) not null, "disabled_at" timestamptz(3) null, primary key ("id"));`);

    this.addSql(`alter table "qr_configurations" add constraint "qr_configurations_merchant_id_foreign" foreign key ("merchant_id") references "merchants" ("id") on delete cascade;`);
  }

  override down(): void | Promise<void> {
    this.addSql(`drop table if exists "qr_configurations" cascade;`);
  }

}
