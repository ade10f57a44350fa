import { Migration } from '@mikro-orm/migrations';

export class Migration20261126091000_ChainNodeIdentity extends Migration {

  override name = 'Migration20261126091000_ChainNodeIdentity';

  override up(): void | Promise<void> {
    this.addSql(`alter table "chain_watchers" add column "genesis_hash" varchar(66) null;`);

    this.addSql(`create table "chain_node_reports" ("network" varchar(32) not null, "environment" varchar(8) not null, "watcher_id" varchar(100) not null, "node" varchar(200) not null, "problem" varchar(500) null, "reported_at" timestamptz(3) not null, primary key ("network", "environment", "watcher_id"));`);
  }

  override down(): void | Promise<void> {
    this.addSql(`drop table if exists "chain_node_reports" cascade;`);

    this.addSql(`alter table "chain_watchers" drop column "genesis_hash";`);
  }

}
