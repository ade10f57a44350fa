import { Migration } from '@mikro-orm/migrations';

export class Migration20261123082541_payment_lifecycle extends Migration {

  override name = 'Migration20261123082541_payment_lifecycle';

  override up(): void | Promise<void> {
    this.addSql(`create table "chain_observations" ("id" bigserial primary key, "network" varchar(32) not null, "asset" varchar(16) not null, "to_address" varchar(128) not null, "tx_hash" varchar(128) not null, "output_index" int not null, "amount" numeric not null, "confirmations" int not null, "block_height" bigint null, "block_hash" varchar(128) null, "observed_at" timestamptz(3) not null, "payment_intent_id" varchar(255) null, "orphaned" boolean not null default false, "counted" boolean not null default false, "counted_late" boolean not null default false, "simulated" boolean not null default false, "created_at" timestamptz(3) not null, "updated_at" timestamptz(3) not null);`);
    this.addSql(`create index "chain_observations_network_block_hash_index" on "chain_observations" ("network", "block_hash");`);
    this.addSql(`create index "chain_observations_network_to_address_index" on "chain_observations" ("network", "to_address");`);
    this.addSql(`create index "chain_observations_payment_intent_id_created_at_id_index" on "chain_observations" ("payment_intent_id", "created_at", "id");`);
    this.addSql(`alter table "chain_observations" add constraint "chain_observations_network_tx_hash_output_index_unique" unique ("network", "tx_hash", "output_index");`);

    this.addSql(`create table "internal_credentials" ("id" varchar(255) not null, "name" varchar(200) not null, "secret_hash" varchar(64) not null, "hint" varchar(16) not null, "created_at" timestamptz(3) not null, "revoked_at" timestamptz(3) null, primary key ("id"));`);
    this.addSql(`alter table "internal_credentials" add constraint "internal_credentials_secret_hash_unique" unique ("secret_hash");`);

    this.addSql(`create table "address_sources" ("merchant_id" varchar(255) not null, "environment" varchar(4) not null, "network" varchar(32) not null, "account_key" varchar(255) not null, "next_index" int not null default 0, "retired_keys" jsonb not null default '{}', "created_at" timestamptz(3) not null, "updated_at" timestamptz(3) not null, primary key ("merchant_id", "environment", "network"));`);

    this.addSql(`create table "address_pool" ("id" bigserial primary key, "merchant_id" varchar(255) not null, "environment" varchar(4) not null, "network" varchar(32) not null, "address" varchar(128) not null, "imported_at" timestamptz(3) not null, "payment_intent_id" varchar(255) null, "leased_at" timestamptz(3) null);`);
    this.addSql(`create index "address_pool_merchant_id_environment_network_leased_at_id_index" on "address_pool" ("merchant_id", "environment", "network", "leased_at", "id");`);
    this.addSql(`alter table "address_pool" add constraint "address_pool_network_address_unique" unique ("network", "address");`);

    this.addSql(`alter table "payment_intents" add "deposit_address" varchar(128) null, add "address_index" int null, add "amount_received" numeric null, add "paid_at" timestamptz(3) null, add "expired_at" timestamptz(3) null, add "cancelled_at" timestamptz(3) null;`);
    this.addSql(`alter table "payment_intents" add constraint "payment_intents_network_deposit_address_unique" unique ("network", "deposit_address");`);

    this.addSql(`alter table "address_sources" add constraint "address_sources_merchant_id_foreign" foreign key ("merchant_id") references "merchants" ("id") on delete cascade;`);

    this.addSql(`alter table "address_pool" add constraint "address_pool_merchant_id_foreign" foreign key ("merchant_id") references "merchants" ("id") on delete cascade;`);

    // The Test environment's built-in keys are shared by every merchant: one index sequence per
    // network (nextval never blocks and never hands out an index twice).
    for (const network of ["bitcoin", "ethereum", "tron", "solana", "polygon"]) {
      this.addSql(`create sequence "test_address_index_${network}" as integer minvalue 0 start 0;`);
    }
  }

  override down(): void | Promise<void> {
    for (const network of ["bitcoin", "ethereum", "tron", "solana", "polygon"]) {
      this.addSql(`drop sequence if exists "test_address_index_${network}";`);
    }
    this.addSql(`drop table if exists "chain_observations" cascade;`);
    this.addSql(`drop table if exists "internal_credentials" cascade;`);
    this.addSql(`drop table if exists "address_sources" cascade;`);
    this.addSql(`drop table if exists "address_pool" cascade;`);

    this.addSql(`alter table "payment_intents" drop constraint "payment_intents_network_deposit_address_unique";`);
    this.addSql(`alter table "payment_intents" drop column "deposit_address", drop column "address_index", drop column "amount_received", drop column "paid_at", drop column "expired_at", drop column "cancelled_at";`);
  }

}
