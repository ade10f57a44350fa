import { Migration } from '@mikro-orm/migrations';

export class Migration20261206000000_RoomForInPlaceUpdates extends Migration {

  override name = 'Migration20261206000000_RoomForInPlaceUpdates';

  override up(): void | Promise<void> {
    // Settlement updates what no index holds (an intent's detected_at, amount_received and
    // updated_at; an output's confirmations and counted) on every report that touches them. With
    // room left on each page PostgreSQL writes the new version beside the old (a HOT update) and
    // none of the tables' indexes (ten and seven) is touched; packed full, each such update inserts
    // into every index. Applies to pages written from now on.
    this.addSql(`alter table "payment_intents" set (fillfactor = 80);`);
    this.addSql(`alter table "chain_observations" set (fillfactor = 80);`);
  }

  override down(): void | Promise<void> {
    this.addSql(`alter table "payment_intents" reset (fillfactor);`);
    this.addSql(`alter table "chain_observations" reset (fillfactor);`);
  }

}
