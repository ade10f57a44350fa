import { Migration } from '@mikro-orm/migrations';

export class Migration20261202110000_QuoteLife extends Migration {

  override name = 'Migration20261202110000_QuoteLife';

  override up(): void | Promise<void> {
    // A fiat-priced intent's quote lapses after QUOTE_SECONDS (at most at its expiry) and the requote
    // sweep (intents/requote.ts) quotes what is still due again; the quotes it replaced are kept, with
    // which of them payments made in a grace counted at. Intents from before keep null: their quote
    // holds until they expire, as it did.
    this.addSql(`alter table "payment_intents" add column "quote_expires_at" timestamptz(3) null, add column "quote_history" jsonb null;`);
    this.addSql(`create index "payment_intents_quote_expires_index" on "payment_intents" ("quote_expires_at") where "status" in ('pending', 'underpaid') and "quote_expires_at" < "expires_at";`);
  }

  override down(): void | Promise<void> {
    this.addSql(`drop index if exists "payment_intents_quote_expires_index";`);
    this.addSql(`alter table "payment_intents" drop column if exists "quote_history", drop column if exists "quote_expires_at";`);
  }

}
