import { Migration } from '@mikro-orm/migrations';

export class Migration20261126090000_WatchedCommitOrder extends Migration {

  override name = 'Migration20261126090000_WatchedCommitOrder';

  override up(): void | Promise<void> {
    // The id of the transaction that created the intent: the chain watchers' list of addresses
    // reads what was added since by it, an order of commits, not of the creating process's clock.
    // Existing intents get 0 (added without rewriting the table): a watcher reads them all at its
    // first read, which every watcher does after this (a cursor from before starts over).
    this.addSql(`alter table "payment_intents" add "watch_xid" xid8 not null default '0';`);
    this.addSql(`alter table "payment_intents" alter column "watch_xid" set default pg_current_xact_id();`);

    this.addSql(`create index "payment_intents_network_environment_watch_xid_id_index" on "payment_intents" ("network", "environment", "watch_xid", "id");`);
  }

  override down(): void | Promise<void> {
    this.addSql(`drop index "payment_intents_network_environment_watch_xid_id_index";`);

    this.addSql(`alter table "payment_intents" drop column "watch_xid";`);
  }

}
