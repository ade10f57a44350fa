import { Migration } from '@mikro-orm/migrations';

export class Migration20261124152937_ChainEnvironmentInternalRoles extends Migration {

  override name = 'Migration20261124152937_ChainEnvironmentInternalRoles';

  override up(): void | Promise<void> {
    this.addSql(`drop index "chain_observations_network_block_hash_index";`);
    this.addSql(`drop index "chain_observations_network_to_address_index";`);
    this.addSql(`alter table "chain_observations" drop constraint "chain_observations_network_tx_hash_output_index_unique";`);
    // An existing output takes its intent's environment; one that matched no intent can only have
    // come from the sandbox or a hand-run watcher before environments existed: Test.
    this.addSql(`alter table "chain_observations" add "environment" varchar(8) null;`);
    this.addSql(`update "chain_observations" o set "environment" = coalesce((select i."environment" from "payment_intents" i where i."id" = o."payment_intent_id"), 'test');`);
    this.addSql(`alter table "chain_observations" alter column "environment" set not null;`);
    this.addSql(`create index "chain_observations_network_environment_block_hash_index" on "chain_observations" ("network", "environment", "block_hash");`);
    this.addSql(`create index "chain_observations_network_environment_to_address_index" on "chain_observations" ("network", "environment", "to_address");`);
    this.addSql(`alter table "chain_observations" add constraint "chain_observations_network_environment_tx_hash_ou_c068a_unique" unique ("network", "environment", "tx_hash", "output_index");`);

    this.addSql(`alter table "internal_credentials" add "roles" text[] not null default '{}', add "environment" varchar(8) null;`);
    // Credentials issued before roles could do everything: they keep both roles, and no environment
    // (admin calls in either; observations need one, so a watcher's credential must be issued anew).
    this.addSql(`update "internal_credentials" set "roles" = '{observe,admin}';`);
  }

  override down(): void | Promise<void> {
    this.addSql(`drop index "chain_observations_network_environment_block_hash_index";`);
    this.addSql(`drop index "chain_observations_network_environment_to_address_index";`);
    this.addSql(`alter table "chain_observations" drop constraint "chain_observations_network_environment_tx_hash_ou_c068a_unique";`);
    this.addSql(`alter table "chain_observations" drop column "environment";`);
    this.addSql(`create index "chain_observations_network_block_hash_index" on "chain_observations" ("network", "block_hash");`);
    this.addSql(`create index "chain_observations_network_to_address_index" on "chain_observations" ("network", "to_address");`);
    this.addSql(`alter table "chain_observations" add constraint "chain_observations_network_tx_hash_output_index_unique" unique ("network", "tx_hash", "output_index");`);

    this.addSql(`alter table "internal_credentials" drop column "roles", drop column "environment";`);
  }

}
