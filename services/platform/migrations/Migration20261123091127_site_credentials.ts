import { Migration } from '@mikro-orm/migrations';

export class Migration20261123091127_site_credentials extends Migration {

  override name = 'Migration20261123091127_site_credentials';

  override up(): void | Promise<void> {
    this.addSql(`create table "site_credentials" ("id" varchar(255) not null, "merchant_id" varchar(255) not null, "environment" varchar(4) not null, "secret_hash" varchar(64) not null, "hint" varchar(20) not null, "allowed_origins" text[] not null, "created_at" timestamptz(3) not null, "revoked_at" timestamptz(3) null, primary key ("id"));`);
    this.addSql(`alter table "site_credentials" add constraint "site_credentials_secret_hash_unique" unique ("secret_hash");`);

    this.addSql(`alter table "site_credentials" add constraint "site_credentials_merchant_id_foreign" foreign key ("merchant_id") references "merchants" ("id") on delete cascade;`);
  }

  override down(): void | Promise<void> {
    this.addSql(`drop table if exists "site_credentials" cascade;`);
  }

}
