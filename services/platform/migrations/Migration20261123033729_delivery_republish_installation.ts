import { Migration } from '@mikro-orm/migrations';

export class Migration20261123033729_delivery_republish_installation extends Migration {

  override name = 'Migration20261123033729_delivery_republish_installation';

  override up(): void | Promise<void> {
    this.addSql(`create table "platform_settings" ("name" varchar(64) not null, "value" varchar(256) not null, "created_at" timestamptz(3) not null, primary key ("name"));`);

    this.addSql(`alter table "webhook_deliveries" add "republished" int not null default 0;`);
  }

  override down(): void | Promise<void> {
    this.addSql(`drop table if exists "platform_settings" cascade;`);

    this.addSql(`alter table "webhook_deliveries" drop column "republished";`);
  }

}
