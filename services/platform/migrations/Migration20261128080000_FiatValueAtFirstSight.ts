import { Migration } from '@mikro-orm/migrations';

export class Migration20261128080000_FiatValueAtFirstSight extends Migration {

  override name = 'Migration20261128080000_FiatValueAtFirstSight';

  override up(): void | Promise<void> {
    // What an output of a fiat-priced intent's asset was worth in the intent's price currency,
    // fixed by the settlement that first saw it (intents/settle.ts): at the quote within the
    // intent's payment window, at the market's rate then for a late payment.
    this.addSql(`alter table "chain_observations" add column "fiat_value" numeric null;`);
  }

  override down(): void | Promise<void> {
    this.addSql(`alter table "chain_observations" drop column if exists "fiat_value";`);
  }

}
