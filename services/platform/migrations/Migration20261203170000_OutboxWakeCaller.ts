import { Migration } from '@mikro-orm/migrations';

export class Migration20261203170000_OutboxWakeCaller extends Migration {

  override name = 'Migration20261203170000_OutboxWakeCaller';

  override up(): void | Promise<void> {
    // The outbox trigger stays silent in a transaction whose writer wakes a relay of its own
    // process after the commit (delivery/outbox-wake.ts): a NOTIFY serialises commits.
    this.addSql(`create or replace function "webhook_deliveries_webhook_deliveries_outbox_notify_fn"() returns trigger as \$\$ begin if current_setting('webhook.outbox_wake', true) is distinct from 'caller' then perform pg_notify('webhook_outbox', ''); end if; return null; end; \$\$ language plpgsql;`);
  }

  override down(): void | Promise<void> {
    this.addSql(`create or replace function "webhook_deliveries_webhook_deliveries_outbox_notify_fn"() returns trigger as \$\$ begin perform pg_notify('webhook_outbox', ''); return null; end; \$\$ language plpgsql;`);
  }

}
