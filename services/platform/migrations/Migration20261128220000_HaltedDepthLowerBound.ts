import { Migration } from '@mikro-orm/migrations';

export class Migration20261128220000_HaltedDepthLowerBound extends Migration {

  override name = 'Migration20261128220000_HaltedDepthLowerBound';

  override up(): void | Promise<void> {
    this.addSql(`alter table "chain_watchers" add column "halted_depth_is_lower_bound" boolean not null default false;`);
  }

  override down(): void | Promise<void> {
    this.addSql(`alter table "chain_watchers" drop column "halted_depth_is_lower_bound";`);
  }

}
