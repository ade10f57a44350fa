import { Migration } from '@mikro-orm/migrations';

export class Migration20261123092813_terminal extends Migration {

  override name = 'Migration20261123092813_terminal';

  override up(): void | Promise<void> {
    this.addSql(`create table "cashier_sessions" ("id" varchar(255) not null, "merchant_id" varchar(255) not null, "environment" varchar(4) not null, "cashier" varchar(100) not null, "terminal" varchar(100) null, "secret_hash" varchar(64) not null, "hint" varchar(20) not null, "created_at" timestamptz(3) not null, "expires_at" timestamptz(3) not null, "revoked_at" timestamptz(3) null, primary key ("id"));`);
    this.addSql(`alter table "cashier_sessions" add constraint "cashier_sessions_secret_hash_unique" unique ("secret_hash");`);
    this.addSql(`create index "cashier_sessions_merchant_id_created_at_index" on "cashier_sessions" ("merchant_id", "created_at");`);

    this.addSql(`alter table "payment_intents" add "source" varchar(8) not null default 'api', add "cashier" varchar(100) null, add "terminal" varchar(100) null;`);

    this.addSql(`alter table "cashier_sessions" add constraint "cashier_sessions_merchant_id_foreign" foreign key ("merchant_id") references "merchants" ("id") on delete cascade;`);
  }

  override down(): void | Promise<void> {
    this.addSql(`drop table if exists "cashier_sessions" cascade;`);

    this.addSql(`alter table "payment_intents" drop column "source", drop column "cashier", drop column "terminal";`);
  }

}
