import { Migration } from '@mikro-orm/migrations';

export class Migration20261128060000_PaymentExceptions extends Migration {

  override name = 'Migration20261128060000_PaymentExceptions';

  override up(): void | Promise<void> {
    // When an output that can never count for its intent (another asset) was told to the merchant
    // (payment.exception, once per output). Outputs from before this version are left unmarked:
    // the next settlement of their intent tells them once.
    this.addSql(`alter table "chain_observations" add column "exception_reported_at" timestamptz(3) null;`);
  }

  override down(): void | Promise<void> {
    this.addSql(`alter table "chain_observations" drop column if exists "exception_reported_at";`);
  }

}
