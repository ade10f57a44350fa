import { Migration } from '@mikro-orm/migrations';

export class Migration20261126095500_LeaseEpoch extends Migration {

  override name = 'Migration20261126095500_LeaseEpoch';

  override up(): void | Promise<void> {
    this.addSql(`alter table "chain_watchers" add column "epoch" bigint not null default 1;`);
  }

  override down(): void | Promise<void> {
    this.addSql(`alter table "chain_watchers" drop column "epoch";`);
  }

}
