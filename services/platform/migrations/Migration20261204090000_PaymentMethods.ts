import { Migration } from '@mikro-orm/migrations';

export class Migration20261204090000_PaymentMethods extends Migration {

  override name = 'Migration20261204090000_PaymentMethods';

  override up(): void | Promise<void> {
    // An intent may offer several payment methods (intents/store.ts StoredMethod): the list on the
    // intent, and each network's deposit address in a table of its own, which the chain watchers
    // follow and an output's address is matched to, beside payment_intents.deposit_address.
    this.addSql(`alter table "payment_intents" add column "methods" jsonb null;`);
    this.addSql(`create table "payment_intent_methods" ("intent_id" varchar(255) not null, "network" varchar(32) not null, "environment" varchar(4) not null, "deposit_address" varchar(128) not null, "required_confirmations" int not null, "watch_xid" xid8 not null default pg_current_xact_id(), primary key ("network", "deposit_address"));`);
    this.addSql(`create index "payment_intent_methods_watch_index" on "payment_intent_methods" ("network", "environment", "watch_xid", "intent_id");`);
    this.addSql(`alter table "payment_intent_methods" add constraint "payment_intent_methods_intent_id_foreign" foreign key ("intent_id") references "payment_intents" ("id") on delete cascade;`);
  }

  override down(): void | Promise<void> {
    this.addSql(`drop table if exists "payment_intent_methods" cascade;`);
    this.addSql(`alter table "payment_intents" drop column if exists "methods";`);
  }

}
