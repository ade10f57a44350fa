import { Migration } from '@mikro-orm/migrations';

export class Migration20261202120000_RetriesWaitInTheOutbox extends Migration {

  override name = 'Migration20261202120000_RetriesWaitInTheOutbox';

  override up(): void | Promise<void> {
    // A retry due later than WEBHOOK_STREAM_WAIT_SECONDS waits in the outbox (published_at null,
    // next_attempt_at its due time) instead of in JetStream, and the relay publishes it once it is
    // due (delivery/store.ts takeUnpublished). The relay reads the two kinds of unpublished rows by
    // an index each: retries by their due time, new deliveries by age, so that many retries waiting
    // for hours are never scanned past. On the partitioned table, each made on every partition.
    this.addSql(`create index "webhook_deliveries_waiting_retry_index" on "webhook_deliveries" ("next_attempt_at") where "published_at" is null and "next_attempt_at" is not null;`);
    this.addSql(`create index "webhook_deliveries_unpublished_new_index" on "webhook_deliveries" ("created_at") where "published_at" is null and "next_attempt_at" is null;`);
  }

  override down(): void | Promise<void> {
    this.addSql(`drop index if exists "webhook_deliveries_unpublished_new_index";`);
    this.addSql(`drop index if exists "webhook_deliveries_waiting_retry_index";`);
  }

}
