import { Migration } from '@mikro-orm/migrations';

export class Migration20261128100000_Retention extends Migration {

  override name = 'Migration20261128100000_Retention';

  override up(): void | Promise<void> {
    // The retention job's lease and last run (services/retention/entities.ts): one row.
    this.addSql(`create table "retention_state" ("id" varchar(32) not null, "holder" varchar(255) null, "lease_until" timestamptz(3) null, "last_started_at" timestamptz(3) null, "last_success_at" timestamptz(3) null, "last_removed" jsonb null, primary key ("id"));`);
    this.addSql(`insert into "retention_state" ("id") values ('retention');`);
    // What each kind's removal and its oldest row are found by: without them the job scans the
    // whole table every run. "if not exists": an operator with large tables builds them first,
    // concurrently, under these names (docs/operations.md, "Retention"), and this finds them built.
    this.addSql(`create index if not exists "webhook_events_created_at_index" on "webhook_events" ("created_at");`);
    this.addSql(`create index if not exists "idempotency_records_created_at_index" on "idempotency_records" ("created_at");`);
    this.addSql(`create index if not exists "chain_rejected_observations_last_at_index" on "chain_rejected_observations" ("last_at");`);
    // An idempotency key's retention counts from created_at (its index above): expires_at is no
    // longer written or read, and its index was one more write on every create. Nullable, not
    // dropped, while processes of the previous version still write it.
    this.addSql(`drop index if exists "idempotency_records_expires_at_index";`);
    this.addSql(`alter table "idempotency_records" alter column "expires_at" drop not null;`);
  }

  override down(): void | Promise<void> {
    this.addSql(`update "idempotency_records" set "expires_at" = "created_at" + interval '24 hours' where "expires_at" is null;`);
    this.addSql(`alter table "idempotency_records" alter column "expires_at" set not null;`);
    this.addSql(`create index if not exists "idempotency_records_expires_at_index" on "idempotency_records" ("expires_at");`);
    this.addSql(`drop index if exists "chain_rejected_observations_last_at_index";`);
    this.addSql(`drop index if exists "idempotency_records_created_at_index";`);
    this.addSql(`drop index if exists "webhook_events_created_at_index";`);
    this.addSql(`drop table if exists "retention_state" cascade;`);
  }

}
