import { Migration } from '@mikro-orm/migrations';

export class Migration20261127223000_ChainBranches extends Migration {

  override name = 'Migration20261127223000_ChainBranches';

  override up(): void | Promise<void> {
    this.addSql(`alter table "chain_blocks" add column "work" numeric(80,0) null, add column "side_outputs" jsonb null;`);
    this.addSql(`alter table "chain_watchers" add column "halted_depth" int null, add column "halted_at" timestamptz(3) null, add column "halted_reason" varchar(500) null, add column "accept_reorg" boolean not null default false;`);
  }

  override down(): void | Promise<void> {
    this.addSql(`alter table "chain_blocks" drop column "work", drop column "side_outputs";`);
    this.addSql(`alter table "chain_watchers" drop column "halted_depth", drop column "halted_at", drop column "halted_reason", drop column "accept_reorg";`);
  }

}
