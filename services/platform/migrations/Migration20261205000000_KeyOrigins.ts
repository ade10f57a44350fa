import { Migration } from '@mikro-orm/migrations';

export class Migration20261205000000_KeyOrigins extends Migration {

  override name = 'Migration20261205000000_KeyOrigins';

  override up(): void | Promise<void> {
    // Each account key's origin (master fingerprint and path), if given: a refund's PSBT names it (services/refunds/psbt.ts).
    this.addSql(`alter table "address_sources" add "key_origins" jsonb not null default '{}';`);
  }

  override down(): void | Promise<void> {
    this.addSql(`alter table "address_sources" drop column "key_origins";`);
  }

}
