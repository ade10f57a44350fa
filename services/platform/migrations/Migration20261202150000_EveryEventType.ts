import { Migration } from '@mikro-orm/migrations';

/**
 * What "*" took before this migration: the spec's types and webhook_endpoint.disabled, not our
 * extensions payment.detected, payment.exception, payment.valued and payment.requoted. Written out
 * here, not imported: the vocabulary moves on, this list is the one of the upgrade.
 */
export const everyTypeBefore = [
  'payment.intent.created',
  'payment.confirmed',
  'payment.reorged',
  'payment.cancelled',
  'payment.expired',
  'payment.underpaid',
  'payment.overpaid',
  'payment.late',
  'webhook.test',
  'webhook_endpoint.disabled',
];

export class Migration20261202150000_EveryEventType extends Migration {

  override name = 'Migration20261202150000_EveryEventType';

  override up(): void | Promise<void> {
    // From now on "*" takes every event type (vocabulary/event-types.ts receives), payment.exception
    // included, for endpoints made from now on. Each endpoint made before with "*" gets the list "*"
    // took then, so it receives exactly what it did (docs/operations.md, the upgrade note); to hear
    // every type, its merchant creates an endpoint with "*" and disables the old one.
    this.addSql(`update "webhook_endpoints" set "enabled_events" = '{${everyTypeBefore.join(',')}}' where '*' = any("enabled_events");`);
  }

  override down(): void | Promise<void> {
    // Back to "*" for the endpoints with exactly that list (one created with it by hand too: the two
    // meant the same then).
    this.addSql(`update "webhook_endpoints" set "enabled_events" = '{*}' where "enabled_events" = '{${everyTypeBefore.join(',')}}';`);
  }

}
