import { Migration } from '@mikro-orm/migrations';

export class Migration20261202140000_BaseArbitrumTestSequences extends Migration {

  override name = 'Migration20261202140000_BaseArbitrumTestSequences';

  override up(): void | Promise<void> {
    // base and arbitrum join the asset table: their Test intents take addresses from the built-in
    // Test key as every network's do (addresses/allocate.ts testSequences), each from a sequence of
    // its own as Migration20261123082541_payment_lifecycle made them for the first networks, so an
    // index is never handed out twice on one network and never blocks a create.
    for (const network of ["base", "arbitrum"]) {
      this.addSql(`create sequence "test_address_index_${network}" as integer minvalue 0 start 0;`);
    }
  }

  override down(): void | Promise<void> {
    for (const network of ["base", "arbitrum"]) {
      this.addSql(`drop sequence if exists "test_address_index_${network}";`);
    }
  }

}
