import { Migration } from '@mikro-orm/migrations';

export class Migration20261121091950_outbox_notify_per_row extends Migration {

  override name = 'Migration20261121091950_outbox_notify_per_row';

  override up(): void | Promise<void> {
    // The statement-level trigger of the webhooks migration notified even for inserts of no
    // rows (every event of a merchant without endpoints woke the relay); the entity now owns a
    // per-row one.
    this.addSql(`drop trigger if exists "webhook_deliveries_outbox_notify" on "webhook_deliveries";`);
    this.addSql(`drop function if exists "webhook_outbox_notify"();`);
    this.addSql(`drop function if exists "webhook_deliveries_webhook_deliveries_outbox_notify_fn"();`);
    this.addSql(`create or replace function "webhook_deliveries_webhook_deliveries_outbox_notify_fn"() returns trigger as \$\$ begin perform pg_notify('webhook_outbox', ''); return null; end; \$\$ language plpgsql;`);
    this.addSql(`create trigger "webhook_deliveries_outbox_notify" AFTER INSERT on "webhook_deliveries" for each ROW execute function "webhook_deliveries_webhook_deliveries_outbox_notify_fn"();`);
  }

  override down(): void | Promise<void> {
    this.addSql(`drop trigger if exists "webhook_deliveries_outbox_notify" on "webhook_deliveries";`);
    this.addSql(`drop function if exists "webhook_deliveries_webhook_deliveries_outbox_notify_fn"();`);
    this.addSql(`create function "webhook_outbox_notify"() returns trigger language plpgsql as $$ begin perform pg_notify('webhook_outbox', ''); return null; end $$;`);
    this.addSql(`create trigger "webhook_deliveries_outbox_notify" after insert on "webhook_deliveries" for each statement execute function "webhook_outbox_notify"();`);
  }

}
