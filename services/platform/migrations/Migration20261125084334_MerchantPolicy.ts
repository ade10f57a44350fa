import { Migration } from '@mikro-orm/migrations';

export class Migration20261125084334_MerchantPolicy extends Migration {

  override name = 'Migration20261125084334_MerchantPolicy';

  override up(): void | Promise<void> {
    this.addSql(`create table "confirmation_policies" ("merchant_id" varchar(255) not null, "environment" varchar(4) not null, "network" varchar(32) not null, "asset" varchar(16) not null, "confirmations" int not null, "below_amount" numeric null, "below_confirmations" int null, "updated_at" timestamptz(3) not null, primary key ("merchant_id", "environment", "network", "asset"));`);

    this.addSql(`create table "merchant_policies" ("merchant_id" varchar(255) not null, "environment" varchar(4) not null, "underpayment_tolerance_bps" int not null default 0, "version" bigint not null default 0, "updated_at" timestamptz(3) not null, primary key ("merchant_id", "environment"));`);

    this.addSql(`alter table "payment_intents" add "sequence" int not null default 1, add "required_confirmations" int null, add "underpayment_tolerance_bps" int not null default 0;`);

    // An existing intent's sequence is the number of its payment events so far (created, then one per status change).
    this.addSql(`update "payment_intents" i set "sequence" = e.n from (select "payment_intent_id", count(*)::int as n from "webhook_events" where "payment_intent_id" is not null and "type" like 'payment.%' group by "payment_intent_id") e where e."payment_intent_id" = i."id";`);

    this.addSql(`alter table "webhook_endpoints" add "enabled_events" text[] not null default '{*}';`);

    this.addSql(`alter table "confirmation_policies" add constraint "confirmation_policies_merchant_id_foreign" foreign key ("merchant_id") references "merchants" ("id") on delete cascade;`);

    this.addSql(`alter table "merchant_policies" add constraint "merchant_policies_merchant_id_foreign" foreign key ("merchant_id") references "merchants" ("id") on delete cascade;`);
  }

  override down(): void | Promise<void> {
    this.addSql(`drop table if exists "confirmation_policies" cascade;`);
    this.addSql(`drop table if exists "merchant_policies" cascade;`);

    this.addSql(`alter table "payment_intents" drop column "sequence", drop column "required_confirmations", drop column "underpayment_tolerance_bps";`);

    this.addSql(`alter table "webhook_endpoints" drop column "enabled_events";`);
  }

}
