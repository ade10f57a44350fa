import { Migration } from '@mikro-orm/migrations';

export class Migration20261121075837_webhooks extends Migration {

  override name = 'Migration20261121075837_webhooks';

  override up(): void | Promise<void> {
    this.addSql(`create table "webhook_endpoints" ("id" varchar(255) not null, "merchant_id" varchar(255) not null, "environment" varchar(4) not null, "url" varchar(2048) not null, "description" varchar(256) null, "status" varchar(16) not null, "secret_ciphertext" bytea not null, "created_at" timestamptz(3) not null, "disabled_at" timestamptz(3) null, primary key ("id"));`);
    this.addSql(`create index "webhook_endpoints_merchant_id_environment_created_at_id_index" on "webhook_endpoints" ("merchant_id", "environment", "created_at", "id");`);
    this.addSql(`create index "webhook_endpoints_merchant_id_environment_status_index" on "webhook_endpoints" ("merchant_id", "environment", "status");`);

    this.addSql(`create table "webhook_deliveries" ("id" varchar(255) not null, "merchant_id" varchar(255) not null, "environment" varchar(4) not null, "event_id" varchar(255) not null, "endpoint_id" varchar(255) not null, "status" varchar(16) not null, "attempt_count" int not null default 0, "next_attempt_at" timestamptz(3) null, "last_attempt_at" timestamptz(3) null, "last_status_code" int null, "last_error" varchar(512) null, "replay_of" varchar(255) null, "published_at" timestamptz(3) null, "stream_seq" bigint null, "created_at" timestamptz(3) not null, "updated_at" timestamptz(3) not null, primary key ("id"));`);
    this.addSql(`create index "webhook_deliveries_merchant_id_environment_created_at_id_index" on "webhook_deliveries" ("merchant_id", "environment", "created_at", "id");`);
    this.addSql(`create index "webhook_deliveries_endpoint_id_created_at_id_index" on "webhook_deliveries" ("endpoint_id", "created_at", "id");`);
    this.addSql(`create index "webhook_deliveries_event_id_created_at_id_index" on "webhook_deliveries" ("event_id", "created_at", "id");`);
    this.addSql(`create index "webhook_deliveries_status_updated_at_index" on "webhook_deliveries" ("status", "updated_at");`);
    this.addSql(`create index "webhook_deliveries_unpublished_index" on "webhook_deliveries" ("created_at") where "published_at" is null;`);

    this.addSql(`create table "webhook_attempts" ("delivery_id" varchar(255) not null, "number" int not null, "started_at" timestamptz(3) not null, "duration_ms" int null, "status_code" int null, "error" varchar(512) null, "outcome" varchar(16) null, "response_excerpt" text null, primary key ("delivery_id", "number"));`);

    this.addSql(`alter table "webhook_endpoints" add constraint "webhook_endpoints_merchant_id_foreign" foreign key ("merchant_id") references "merchants" ("id") on delete cascade;`);

    this.addSql(`alter table "webhook_deliveries" add constraint "webhook_deliveries_merchant_id_foreign" foreign key ("merchant_id") references "merchants" ("id") on delete cascade;`);
    this.addSql(`alter table "webhook_deliveries" add constraint "webhook_deliveries_event_id_foreign" foreign key ("event_id") references "webhook_events" ("id") on delete cascade;`);
    this.addSql(`alter table "webhook_deliveries" add constraint "webhook_deliveries_endpoint_id_foreign" foreign key ("endpoint_id") references "webhook_endpoints" ("id") on delete cascade;`);

    this.addSql(`alter table "webhook_attempts" add constraint "webhook_attempts_delivery_id_foreign" foreign key ("delivery_id") references "webhook_deliveries" ("id") on delete cascade;`);

    // Wakes the outbox relay when deliveries are committed (NOTIFY is sent at commit),
    // so a new delivery is published at once instead of at the next poll.
    this.addSql(`create function "webhook_outbox_notify"() returns trigger language plpgsql as $$ begin perform pg_notify('webhook_outbox', ''); return null; end $$;`);
    this.addSql(`create trigger "webhook_deliveries_outbox_notify" after insert on "webhook_deliveries" for each statement execute function "webhook_outbox_notify"();`);
  }

  override down(): void | Promise<void> {
    this.addSql(`drop trigger if exists "webhook_deliveries_outbox_notify" on "webhook_deliveries";`);
    this.addSql(`drop function if exists "webhook_outbox_notify"();`);
    this.addSql(`alter table "webhook_deliveries" drop constraint "webhook_deliveries_endpoint_id_foreign";`);
    this.addSql(`alter table "webhook_attempts" drop constraint "webhook_attempts_delivery_id_foreign";`);

    this.addSql(`drop table if exists "webhook_endpoints" cascade;`);
    this.addSql(`drop table if exists "webhook_deliveries" cascade;`);
    this.addSql(`drop table if exists "webhook_attempts" cascade;`);
  }

}
