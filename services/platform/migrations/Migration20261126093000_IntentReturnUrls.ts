import { Migration } from '@mikro-orm/migrations';

export class Migration20261126093000_IntentReturnUrls extends Migration {

  override name = 'Migration20261126093000_IntentReturnUrls';

  override up(): void | Promise<void> {
    // Null on every existing intent: its checkout page offers no way back, as before.
    this.addSql(`alter table "payment_intents" add "redirect_url" varchar(2048) null, add "cancel_url" varchar(2048) null;`);
  }

  override down(): void | Promise<void> {
    this.addSql(`alter table "payment_intents" drop column "redirect_url", drop column "cancel_url";`);
  }

}
