import { Migration } from '@mikro-orm/migrations';

export class Migration20261202130000_DeliveryCause extends Migration {

  override name = 'Migration20261202130000_DeliveryCause';

  override up(): void | Promise<void> {
    // Why a delivery was made (delivery/webhook-deliveries.ts pendingDeliveries): its event, a replay,
    // or an operator's recovery of missed events. Deliveries from before read `event` (a replay of
    // then is still told by its replay_of). Added to the partitioned table, so to every day and the
    // legacy partition at once; a constant default rewrites no row. No check constraint: a new day is made
    // `like` the table, which copies defaults and NOT NULL but not checks, and attaching it would
    // then be refused; the values are the code's (vocabulary/delivery-status.ts deliveryCauses).
    this.addSql(`alter table "webhook_deliveries" add column "cause" varchar(16) not null default 'event';`);
  }

  override down(): void | Promise<void> {
    this.addSql(`alter table "webhook_deliveries" drop column if exists "cause";`);
  }

}
