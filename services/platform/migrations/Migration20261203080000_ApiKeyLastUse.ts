import { Migration } from '@mikro-orm/migrations';

export class Migration20261203080000_ApiKeyLastUse extends Migration {

  override name = 'Migration20261203080000_ApiKeyLastUse';

  override up(): void | Promise<void> {
    // When each API key last authenticated a call (services/auth/key-last-use.ts), in a table of its
    // own: an update of an api_keys row drops the key from every process's credential cache
    // (credential_changed), which a last-use write must not do. Keys used before are "never" until
    // their next call.
    this.addSql(`create table "api_key_last_uses" ("api_key_id" varchar(255) not null, "last_used_at" timestamptz(3) not null, primary key ("api_key_id"));`);
    this.addSql(`alter table "api_key_last_uses" add constraint "api_key_last_uses_api_key_id_foreign" foreign key ("api_key_id") references "api_keys" ("id") on update cascade on delete cascade;`);
  }

  override down(): void | Promise<void> {
    this.addSql(`drop table if exists "api_key_last_uses" cascade;`);
  }

}
