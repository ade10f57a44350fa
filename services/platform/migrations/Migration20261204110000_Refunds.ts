import { Migration } from '@mikro-orm/migrations';

export class Migration20261204110000_Refunds extends Migration {

  override name = 'Migration20261204110000_Refunds';

  override up(): void | Promise<void> {
    // Refunds of what intents received (services/refunds), and what the completed ones gave back in an intent's own asset.
    this.addSql(`create table "refunds" ("id" varchar(32) not null, "merchant_id" varchar(255) not null, "intent_id" varchar(255) not null, "environment" varchar(4) not null, "status" varchar(20) not null, "network" varchar(32) not null, "asset" varchar(16) not null, "amount" numeric not null, "payment_tx_hash" varchar(128) not null, "payment_output_index" int not null, "address" varchar(128) null, "claim_token" varchar(40) not null, "reason" varchar(500) null, "price_amount" numeric null, "price_currency" varchar(3) null, "rate" numeric null, "transactions" jsonb not null default '[]', "simulated" boolean not null default false, "created_at" timestamptz(3) not null, "updated_at" timestamptz(3) not null, "address_received_at" timestamptz(3) null, "sent_at" timestamptz(3) null, "completed_at" timestamptz(3) null, "cancelled_at" timestamptz(3) null, "watch_xid" xid8 null, primary key ("id"));`);
    this.addSql(`alter table "refunds" add constraint "refunds_claim_token_unique" unique ("claim_token");`);
    this.addSql(`create index "refunds_intent_index" on "refunds" ("intent_id", "created_at");`);
    this.addSql(`create index "refunds_watch_index" on "refunds" ("network", "environment", "watch_xid", "id");`);

    this.addSql(`alter table "payment_intents" add "amount_refunded" numeric null;`);

    this.addSql(`alter table "refunds" add constraint "refunds_merchant_id_foreign" foreign key ("merchant_id") references "merchants" ("id") on delete cascade;`);
    this.addSql(`alter table "refunds" add constraint "refunds_intent_id_foreign" foreign key ("intent_id") references "payment_intents" ("id") on delete cascade;`);
  }

  override down(): void | Promise<void> {
    this.addSql(`drop table if exists "refunds" cascade;`);

    this.addSql(`alter table "payment_intents" drop column "amount_refunded";`);
  }

}
