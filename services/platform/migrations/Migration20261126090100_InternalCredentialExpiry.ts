import { Migration } from '@mikro-orm/migrations';

export class Migration20261126090100_InternalCredentialExpiry extends Migration {

  override name = 'Migration20261126090100_InternalCredentialExpiry';

  override up(): void | Promise<void> {
    // Null for every existing credential: those created by an operator never expire.
    this.addSql(`alter table "internal_credentials" add "expires_at" timestamptz(3) null;`);
  }

  override down(): void | Promise<void> {
    this.addSql(`alter table "internal_credentials" drop column "expires_at";`);
  }

}
