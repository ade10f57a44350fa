import { Migration } from '@mikro-orm/migrations';

export class Migration20261128090000_DashboardSessions extends Migration {

  override name = 'Migration20261128090000_DashboardSessions';

  override up(): void | Promise<void> {
    // The merchant dashboard's one-time sign-in links and its sessions (services/auth/entities.ts):
    // only their tokens' hashes are kept. A session signed in with a key goes with the key's row.
    this.addSql(`create table "dashboard_links" ("id" varchar(255) not null, "merchant_id" varchar(255) not null, "environment" varchar(4) not null, "secret_hash" varchar(64) not null, "read_only" boolean not null default false, "created_at" timestamptz(3) not null, "expires_at" timestamptz(3) not null, "used_at" timestamptz(3) null, primary key ("id"));`);
    this.addSql(`alter table "dashboard_links" add constraint "dashboard_links_secret_hash_unique" unique ("secret_hash");`);
    this.addSql(`alter table "dashboard_links" add constraint "dashboard_links_merchant_id_foreign" foreign key ("merchant_id") references "merchants" ("id") on delete cascade;`);
    this.addSql(`create table "dashboard_sessions" ("id" varchar(255) not null, "merchant_id" varchar(255) not null, "environment" varchar(4) not null, "secret_hash" varchar(64) not null, "api_key_id" varchar(255) null, "link_id" varchar(255) null, "read_only" boolean not null default false, "created_at" timestamptz(3) not null, "last_seen_at" timestamptz(3) not null, "idle_seconds" int not null, "expires_at" timestamptz(3) not null, "revoked_at" timestamptz(3) null, primary key ("id"));`);
    this.addSql(`alter table "dashboard_sessions" add constraint "dashboard_sessions_secret_hash_unique" unique ("secret_hash");`);
    this.addSql(`alter table "dashboard_sessions" add constraint "dashboard_sessions_merchant_id_foreign" foreign key ("merchant_id") references "merchants" ("id") on delete cascade;`);
    this.addSql(`alter table "dashboard_sessions" add constraint "dashboard_sessions_api_key_id_foreign" foreign key ("api_key_id") references "api_keys" ("id") on delete cascade;`);
    this.addSql(`alter table "dashboard_sessions" add constraint "dashboard_sessions_link_id_foreign" foreign key ("link_id") references "dashboard_links" ("id") on delete cascade;`);
  }

  override down(): void | Promise<void> {
    this.addSql(`drop table if exists "dashboard_sessions" cascade;`);
    this.addSql(`drop table if exists "dashboard_links" cascade;`);
  }

}
