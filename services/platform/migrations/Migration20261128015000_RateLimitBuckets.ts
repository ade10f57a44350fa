import { Migration } from '@mikro-orm/migrations';

export class Migration20261128015000_RateLimitBuckets extends Migration {

  override name = 'Migration20261128015000_RateLimitBuckets';

  override up(): void | Promise<void> {
    // The token buckets every rpc process takes from (platform/rate-limit.ts), so a budget is one
    // budget however many processes serve it. UNLOGGED: no WAL for a row written on every limited
    // call, and after a crash the table starts empty, which is only full buckets. full_at (when
    // the bucket has refilled) lets a sweep drop the idle ones; no index, so each take's update
    // stays a heap-only one.
    this.addSql(`create unlogged table "rate_limit_buckets" (
      "key" text primary key,
      "tokens" double precision not null,
      "granted" integer not null,
      "at" timestamptz not null,
      "full_at" timestamptz not null
    );`);
  }

  override down(): void | Promise<void> {
    this.addSql(`drop table if exists "rate_limit_buckets";`);
  }

}
