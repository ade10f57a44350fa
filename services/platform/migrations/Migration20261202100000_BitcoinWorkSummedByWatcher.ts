import { Migration } from '@mikro-orm/migrations';

export class Migration20261202100000_BitcoinWorkSummedByWatcher extends Migration {

  override name = 'Migration20261202100000_BitcoinWorkSummedByWatcher';

  override up(): void | Promise<void> {
    // A bitcoin block's work is now the watcher's own sum above its checkpoint (bitcoin-headers.ts),
    // far below the node's whole-chain `chainwork` kept by earlier versions: compared with one of
    // those, every new branch would lose. Works kept before are dropped: such a block is compared by
    // height, as a block without work always was, until the chain has moved past it.
    this.addSql(`update "chain_blocks" set "work" = null where "network" = 'bitcoin' and "work" is not null;`);
  }

  override down(): void | Promise<void> {
    // Nothing to give back: the node's figures were its word, and are not asked for again.
  }

}
