import { Migration } from '@mikro-orm/migrations';

export class Migration20261121074008_initial extends Migration {

  override name = 'Migration20261121074008_initial';

  override up(): void | Promise<void> {
    this.addSql(`create table "idempotency_records" ("merchant_id" varchar(255) not null, "environment" varchar(4) not null, "key" varchar(128) not null, "rpc" varchar(255) not null, "fingerprint" varchar(64) not null, "response" bytea not null, "created_at" timestamptz(3) not null, "expires_at" timestamptz(3) not null, primary key ("merchant_id", "environment", "key"));`);
    this.addSql(`create index "idempotency_records_expires_at_index" on "idempotency_records" ("expires_at");`);

    this.addSql(`create table "merchants" ("id" varchar(255) not null, "name" varchar(200) not null, "created_at" timestamptz(3) not null, primary key ("id"));`);

    this.addSql(`create table "api_keys" ("id" varchar(255) not null, "merchant_id" varchar(255) not null, "environment" varchar(4) not null, "secret_hash" varchar(64) not null, "hint" varchar(16) not null, "scopes" text[] not null, "created_at" timestamptz(3) not null, "revoked_at" timestamptz(3) null, primary key ("id"));`);
    this.addSql(`alter table "api_keys" add constraint "api_keys_secret_hash_unique" unique ("secret_hash");`);

    this.addSql(`create table "payment_intents" ("id" varchar(255) not null, "merchant_id" varchar(255) not null, "environment" varchar(4) not null, "status" varchar(16) not null, "merchant_reference" varchar(128) null, "network" varchar(32) not null, "asset" varchar(16) not null, "requested_amount" numeric not null, "metadata" jsonb not null, "created_at" timestamptz(3) not null, "expires_at" timestamptz(3) not null, "updated_at" timestamptz(3) not null, primary key ("id"));`);
    this.addSql(`create index "payment_intents_merchant_id_environment_created_at_id_index" on "payment_intents" ("merchant_id", "environment", "created_at", "id");`);
    this.addSql(`create index "payment_intents_merchant_id_environment_status_cre_29308_index" on "payment_intents" ("merchant_id", "environment", "status", "created_at", "id");`);
    this.addSql(`create index "payment_intents_merchant_id_environment_merchant_r_f07f6_index" on "payment_intents" ("merchant_id", "environment", "merchant_reference", "created_at", "id");`);
    this.addSql(`create index "payment_intents_status_expires_at_index" on "payment_intents" ("status", "expires_at");`);

    this.addSql(`create table "webhook_events" ("id" varchar(255) not null, "merchant_id" varchar(255) not null, "environment" varchar(4) not null, "type" varchar(64) not null, "payment_intent_id" varchar(255) null, "payload" text not null, "created_at" timestamptz(3) not null, primary key ("id"));`);
    this.addSql(`create index "webhook_events_merchant_id_environment_created_at_index" on "webhook_events" ("merchant_id", "environment", "created_at");`);
    this.addSql(`create index "webhook_events_payment_intent_id_index" on "webhook_events" ("payment_intent_id");`);

    this.addSql(`alter table "api_keys" add constraint "api_keys_merchant_id_foreign" foreign key ("merchant_id") references "merchants" ("id") on delete cascade;`);

    this.addSql(`alter table "payment_intents" add constraint "payment_intents_merchant_id_foreign" foreign key ("merchant_id") references "merchants" ("id") on delete cascade;`);

    this.addSql(`alter table "webhook_events" add constraint "webhook_events_merchant_id_foreign" foreign key ("merchant_id") references "merchants" ("id") on delete cascade;`);
  }

  override down(): void | Promise<void> {
    this.addSql(`alter table "api_keys" drop constraint "api_keys_merchant_id_foreign";`);
    this.addSql(`alter table "payment_intents" drop constraint "payment_intents_merchant_id_foreign";`);
    this.addSql(`alter table "webhook_events" drop constraint "webhook_events_merchant_id_foreign";`);

    this.addSql(`drop table if exists "idempotency_records" cascade;`);
    this.addSql(`drop table if exists "merchants" cascade;`);
    this.addSql(`drop table if exists "api_keys" cascade;`);
    this.addSql(`drop table if exists "payment_intents" cascade;`);
    this.addSql(`drop table if exists "webhook_events" cascade;`);
  }

}
