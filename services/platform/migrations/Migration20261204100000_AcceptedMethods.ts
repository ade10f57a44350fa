import { Migration } from '@mikro-orm/migrations';

export class Migration20261204100000_AcceptedMethods extends Migration {

  override name = 'Migration20261204100000_AcceptedMethods';

  override up(): void | Promise<void> {
    // The payment methods a merchant offers when a create asks for "all" (policy/policy.ts); null: every one watched.
    this.addSql(`alter table "merchant_policies" add column "accepted_methods" jsonb null;`);
  }

  override down(): void | Promise<void> {
    this.addSql(`alter table "merchant_policies" drop column if exists "accepted_methods";`);
  }

}
