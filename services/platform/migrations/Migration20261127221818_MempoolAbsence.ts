import { Migration } from '@mikro-orm/migrations';

export class Migration20261127221818_MempoolAbsence extends Migration {

  override name = 'Migration20261127221818_MempoolAbsence';

  override up(): void | Promise<void> {
    // A live mempool output missing from the mempool's reports: since when, and from how many in a
    // row. One report without it no longer withdraws it (services/chains/mempool.ts).
    this.addSql(`alter table "chain_observations" add "mempool_absent_since" timestamptz(3) null, add "mempool_absent_reads" int not null default 0;`);
  }

  override down(): void | Promise<void> {
    this.addSql(`alter table "chain_observations" drop column "mempool_absent_since", drop column "mempool_absent_reads";`);
  }

}
