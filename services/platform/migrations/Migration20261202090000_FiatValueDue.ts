import { Migration } from '@mikro-orm/migrations';

export class Migration20261202090000_FiatValueDue extends Migration {

  override name = 'Migration20261202090000_FiatValueDue';

  override up(): void | Promise<void> {
    // Since when a fiat-priced intent has an output of its asset that settlement could not value
    // (no fresh rate when it was seen): the valuation sweep (intents/valuation.ts) reads only these,
    // by the partial index, values them once a rate is fresh, and clears the mark.
    this.addSql(`alter table "payment_intents" add column "fiat_value_due_since" timestamptz(3) null;`);
    this.addSql(`create index "payment_intents_fiat_value_due_index" on "payment_intents" ("fiat_value_due_since") where "fiat_value_due_since" is not null;`);
    // Outputs left without a value before this version (settlement skipped them and nothing tried
    // again) are due too, since their first sighting: the sweep values them like any other.
    this.addSql(`update "payment_intents" i set "fiat_value_due_since" = o.since
      from (select o.payment_intent_id, min(o.created_at) as since
              from "chain_observations" o join "payment_intents" p on p.id = o.payment_intent_id
             where p.price_currency is not null and o.asset = p.asset and not o.orphaned and o.fiat_value is null
             group by o.payment_intent_id) o
     where i.id = o.payment_intent_id;`);
  }

  override down(): void | Promise<void> {
    this.addSql(`drop index if exists "payment_intents_fiat_value_due_index";`);
    this.addSql(`alter table "payment_intents" drop column if exists "fiat_value_due_since";`);
  }

}
