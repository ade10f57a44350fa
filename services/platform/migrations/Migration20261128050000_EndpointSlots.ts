import { Migration } from '@mikro-orm/migrations';

export class Migration20261128050000_EndpointSlots extends Migration {

  override name = 'Migration20261128050000_EndpointSlots';

  override up(): void | Promise<void> {
    // What every delivery worker shares about an endpoint that is not known fast
    // (delivery/shared-gate.ts): its in-flight slots, each a lease taken before a claim and given
    // back when the attempt ends (or lapsing once the attempt can no longer be running), and its
    // circuit (timeouts in a row, open). Logged tables: a slot is written only for an endpoint that
    // is new, slow or failing, and after a crash a lost lease would let a hanging endpoint take
    // more than its cap.
    this.addSql(`create table "webhook_endpoint_slots" (
      "endpoint_id" text not null,
      "slot" integer not null,
      "holder" text not null,
      "taken_at" timestamptz not null,
      "until" timestamptz not null,
      primary key ("endpoint_id", "slot")
    );`);
    this.addSql(`create index "webhook_endpoint_slots_holder_index" on "webhook_endpoint_slots" ("holder");`);
    this.addSql(`create table "webhook_endpoint_circuits" (
      "endpoint_id" text primary key,
      "timeouts_in_row" integer not null,
      "open" boolean not null,
      "updated_at" timestamptz not null
    );`);
  }

  override down(): void | Promise<void> {
    this.addSql(`drop table if exists "webhook_endpoint_slots";`);
    this.addSql(`drop table if exists "webhook_endpoint_circuits";`);
  }

}
