import { Migration } from '@mikro-orm/migrations';

export class Migration20261203130000_FiatValueConfirmed extends Migration {

  override name = 'Migration20261203130000_FiatValueConfirmed';

  override up(): void | Promise<void> {
    // A fiat-priced intent's output's value at the market's rate when it first counted (its
    // confirmations reached): the bookkeeping export's fiat_value_at_confirmation (settle.ts writes
    // it through chains/output-store.ts). Null: not counted yet, not of a fiat-priced intent's
    // asset, counted before this column, or no fresh rate at that moment (the engine keeps no history).
    this.addSql(`alter table "chain_observations" add column "fiat_value_confirmed" numeric null;`);
  }

  override down(): void | Promise<void> {
    this.addSql(`alter table "chain_observations" drop column if exists "fiat_value_confirmed";`);
  }

}
