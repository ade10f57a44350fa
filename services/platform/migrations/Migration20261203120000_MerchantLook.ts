import { Migration } from '@mikro-orm/migrations';

export class Migration20261203120000_MerchantLook extends Migration {

  override name = 'Migration20261203120000_MerchantLook';

  override up(): void | Promise<void> {
    // A shop's look (services/vocabulary/shop-look.ts checks the values; services/auth/merchants.ts
    // writes them, the only writer of merchants): a logo the shopper's browser loads over https,
    // and a brand colour. Null: none (the pages show the name alone, in the house colours).
    this.addSql(`alter table "merchants" add column "logo_url" varchar(2048) null, add column "brand_color" varchar(7) null;`);
  }

  override down(): void | Promise<void> {
    this.addSql(`alter table "merchants" drop column if exists "brand_color", drop column if exists "logo_url";`);
  }

}
