import { Migration } from '@mikro-orm/migrations';

const others = ['polygon', 'base', 'arbitrum'];

/** The next value a sequence would hand out. */
const nextOf = (sequence: string) => `(select case when is_called then last_value + 1 else last_value end from "${sequence}")`;

export class Migration20261202160000_EvmSharedIndex extends Migration {

  override name = 'Migration20261202160000_EvmSharedIndex';

  override up(): void | Promise<void> {
    // The EVM networks' built-in Test key is one (m/44'/60'/0'): a sequence each handed one address to
    // an intent on each chain. From now on they all take ethereum's (addresses/allocate.ts
    // testSequences), moved past every index any of them handed out; the others go. Addresses
    // handed out twice before stay with their intents. (A merchant's own key is the source of one
    // network only: addresses/admin.ts refuses it for a second.)
    const next = ['ethereum', ...others].map((n) => nextOf(`test_address_index_${n}`)).join(', ');
    this.addSql(`select setval('test_address_index_ethereum', greatest(${next}), false);`);
    for (const network of others) this.addSql(`drop sequence if exists "test_address_index_${network}";`);
  }

  override down(): void | Promise<void> {
    // A sequence each again, each starting where the shared one is, so no index is handed out twice.
    for (const network of others) {
      this.addSql(`create sequence "test_address_index_${network}" as integer minvalue 0 start 0;`);
      this.addSql(`select setval('test_address_index_${network}', ${nextOf('test_address_index_ethereum')}, false);`);
    }
  }

}
