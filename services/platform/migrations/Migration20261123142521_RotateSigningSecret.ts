import { Migration } from '@mikro-orm/migrations';

export class Migration20261123142521_RotateSigningSecret extends Migration {

  override name = 'Migration20261123142521_RotateSigningSecret';

  override up(): void | Promise<void> {
    this.addSql(`alter table "webhook_endpoints" add "previous_secret_ciphertext" bytea null, add "previous_secret_expires_at" timestamptz(3) null, add "last_error" varchar(64) null;`);
  }

  override down(): void | Promise<void> {
    this.addSql(`alter table "webhook_endpoints" drop column "previous_secret_ciphertext", drop column "previous_secret_expires_at", drop column "last_error";`);
  }

}
