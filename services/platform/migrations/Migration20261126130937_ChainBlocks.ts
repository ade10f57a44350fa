import { Migration } from '@mikro-orm/migrations';

export class Migration20261126130937_ChainBlocks extends Migration {

  override name = 'Migration20261126130937_ChainBlocks';

  override up(): void | Promise<void> {
    this.addSql(`create table "chain_blocks" ("network" varchar(32) not null, "environment" varchar(8) not null, "hash" varchar(200) not null, "height" bigint not null, "parent_hash" varchar(200) null, "time" timestamptz(3) null, "best" boolean not null, "reported_at" timestamptz(3) not null, primary key ("network", "environment", "hash"));`);
    this.addSql(`create index "chain_blocks_network_environment_best_height_index" on "chain_blocks" ("network", "environment", "best", "height");`);

    this.addSql(`create index "chain_observations_network_environment_block_height_index" on "chain_observations" ("network", "environment", "block_height");`);

    // The blocks each watcher saved as its recent history become the core's chain, so outputs
    // recorded before this version keep gaining confirmations from the next report on.
    this.addSql(`insert into "chain_blocks" ("network", "environment", "hash", "height", "parent_hash", "time", "best", "reported_at")
      select w.network, w.environment, lower(b->>'hash'), (b->>'height')::bigint,
             lower(lag(b->>'hash') over (partition by w.network, w.environment order by (b->>'height')::bigint)), null, true, now()
        from "chain_watchers" w cross join lateral jsonb_array_elements(coalesce(w.recent_blocks, '[]'::jsonb)) b
      on conflict do nothing;`);
  }

  override down(): void | Promise<void> {
    this.addSql(`drop table if exists "chain_blocks" cascade;`);

    this.addSql(`drop index "chain_observations_network_environment_block_height_index";`);
  }

}
