import { Migration } from '@mikro-orm/migrations';

export class Migration20261128015634_WebhookRecoveries extends Migration {

  override name = 'Migration20261128015634_WebhookRecoveries';

  override up(): void | Promise<void> {
    // A recovery of missed events, enqueued a page at a time (webhooks/recovery.ts); one running per endpoint.
    this.addSql(`create table "webhook_recoveries" ("id" varchar(255) not null, "endpoint_id" varchar(255) not null, "since" timestamptz(3) not null, "until" timestamptz(3) not null, "cursor_created_at" timestamptz(3) null, "cursor_event_id" varchar(255) null, "page_size" int not null, "events" int not null, "enqueued" int not null default 0, "status" varchar(16) not null, "page_at" timestamptz(3) not null, "created_at" timestamptz(3) not null, "updated_at" timestamptz(3) not null, primary key ("id"));`);
    this.addSql(`create unique index "webhook_recoveries_running_index" on "webhook_recoveries" ("endpoint_id") where "status" = 'running';`);
    this.addSql(`alter table "webhook_recoveries" add constraint "webhook_recoveries_endpoint_id_foreign" foreign key ("endpoint_id") references "webhook_endpoints" ("id") on delete cascade;`);
  }

  override down(): void | Promise<void> {
    this.addSql(`drop table if exists "webhook_recoveries" cascade;`);
  }

}
