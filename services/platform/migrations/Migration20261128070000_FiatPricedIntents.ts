import { Migration } from '@mikro-orm/migrations';

export class Migration20261128070000_FiatPricedIntents extends Migration {

  override name = 'Migration20261128070000_FiatPricedIntents';

  override up(): void | Promise<void> {
    // Null on every existing intent (priced in its asset). The quote is kept on the row, so a
    // replay, a read and every event show the rate the intent was created at, not today's.
    this.addSql(`alter table "payment_intents" add "price_amount" numeric null, add "price_currency" varchar(3) null, add "quote_rate" numeric null, add "quote_sources" jsonb null, add "quoted_at" timestamptz(3) null;`);
    // 0: no spread, as every merchant had before.
    this.addSql(`alter table "merchant_policies" add "price_spread_bps" int not null default 0;`);
  }

  override down(): void | Promise<void> {
    this.addSql(`alter table "payment_intents" drop column "price_amount", drop column "price_currency", drop column "quote_rate", drop column "quote_sources", drop column "quoted_at";`);
    this.addSql(`alter table "merchant_policies" drop column "price_spread_bps";`);
  }

}
