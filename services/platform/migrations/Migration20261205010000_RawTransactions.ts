import { Migration } from '@mikro-orm/migrations';

export class Migration20261205010000_RawTransactions extends Migration {

  override name = 'Migration20261205010000_RawTransactions';

  override up(): void | Promise<void> {
    // A bitcoin output's transaction bytes (without witnesses) as the watcher read them: a refund's PSBT carries them as its non-witness UTXO.
    this.addSql(`alter table "chain_observations" add "raw_transaction" bytea null;`);
  }

  override down(): void | Promise<void> {
    this.addSql(`alter table "chain_observations" drop column "raw_transaction";`);
  }

}
