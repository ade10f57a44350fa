import { Migration } from '@mikro-orm/migrations';

export class Migration20261124150204_SecretKeyCheck extends Migration {

  override name = 'Migration20261124150204_SecretKeyCheck';

  override up(): void | Promise<void> {
    this.addSql(`create table "secret_key_check" ("id" smallint primary key, "key_id" varchar(16) not null, "check_value" varchar(64) not null, "updated_at" timestamptz(3) not null);`);
    // Secrets sealed so far carry no key id: the 0x00 layout byte marks them (see SecretBox).
    this.addSql(`update "webhook_endpoints" set "secret_ciphertext" = '\\x00'::bytea || "secret_ciphertext", "previous_secret_ciphertext" = '\\x00'::bytea || "previous_secret_ciphertext";`);
  }

  override down(): void | Promise<void> {
    this.addSql(`drop table if exists "secret_key_check" cascade;`);
    // Only secrets still in the old layout go back; one sealed with a key id stays unreadable to the old code.
    this.addSql(`update "webhook_endpoints" set "secret_ciphertext" = substring("secret_ciphertext" from 2) where get_byte("secret_ciphertext", 0) = 0;`);
    this.addSql(`update "webhook_endpoints" set "previous_secret_ciphertext" = substring("previous_secret_ciphertext" from 2) where get_byte("previous_secret_ciphertext", 0) = 0;`);
  }

}
