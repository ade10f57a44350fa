import { Migration } from '@mikro-orm/migrations';

export class Migration20261125054905_EndpointEnabledAt extends Migration {

  override name = 'Migration20261125054905_EndpointEnabledAt';

  override up(): void | Promise<void> {
    this.addSql(`alter table "webhook_endpoints" add "enabled_at" timestamptz(3) null;`);
  }

  override down(): void | Promise<void> {
    this.addSql(`alter table "webhook_endpoints" drop column "enabled_at";`);
  }

}
