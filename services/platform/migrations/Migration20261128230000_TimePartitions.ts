import { Migration } from '@mikro-orm/migrations';

/**
 * Webhook events, deliveries and attempts become tables partitioned by day (issue 50), so that
 * retention drops a day's partition instead of deleting its rows (services/retention/partitions.ts).
 *
 * Each existing table is kept whole, renamed `<table>_legacy`, and attached as the partition of
 * everything before the cutover: no row is copied. The cutover is a UTC midnight: the bound of a
 * `<table>_before_partitions` check constraint an operator built and validated beforehand (that
 * also spares the attach its scan: docs/operations.md, "Retention"), else the second midnight from
 * now, so rows written meanwhile by processes still running the previous version, and a test
 * database's whole life, fall in it. Daily partitions follow from the cutover; the job keeps a
 * week ahead.
 *
 * Keys: a partition key must be part of every unique key, so events and deliveries are keyed by
 * (id, created_at) and attempts by (delivery_id, number, delivery_time), where delivery_time is
 * the time the delivery's id carries (payments_id_time; -infinity for an id of the older shape,
 * which puts its attempts in the legacy partition). Foreign keys between the three cannot hold
 * across partitions dropped one by one; what they guaranteed is kept by the code that writes them
 * (an event and its deliveries in one statement, attempts only of a claimed delivery) and by
 * retention (a delivery outlives its event only hidden: reads join the event).
 */
const cutoverOf = (table: string, column: string) => `
  select substring(pg_get_constraintdef(c.oid) from '''([^'']+)''')::timestamptz into cutover
    from pg_constraint c where c.conrelid = '${table}'::regclass and c.conname = '${table}_before_partitions' and c.convalidated;
  if cutover is null then
    cutover := (date_trunc('day', now() at time zone 'UTC') + interval '2 days') at time zone 'UTC';
    execute format('alter table ${table} drop constraint if exists ${table}_before_partitions');
    execute format('alter table ${table} add constraint ${table}_before_partitions check (${column} < %L)', cutover);
  end if;`;

export class Migration20261128230000_TimePartitions extends Migration {

  override name = 'Migration20261128230000_TimePartitions';

  override up(): void | Promise<void> {
    // The creation time a timed id carries (services/platform/ids.ts newTimedIds): 8 base62
    // characters of milliseconds after the prefix, in ids of 26 characters; null for any other.
    this.addSql(`create or replace function payments_id_time(id text) returns timestamptz
      language plpgsql immutable strict parallel safe as $$
      declare
        digits constant text := '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
        body text;
        ms bigint := 0;
      begin
        if id !~ '^[a-z]+_[0-9A-Za-z]{26}$' then return null; end if;
        body := substr(id, strpos(id, '_') + 1, 8);
        for i in 1..8 loop
          ms := ms * 62 + strpos(digits, substr(body, i, 1)) - 1;
        end loop;
        return timestamptz 'epoch' + ms * interval '1 millisecond';
      end $$;`);

    // Where the row of an id can be, as two immutable bounds: a condition on them is folded to
    // constants when the statement is planned for its id, so the partitions are pruned then, not
    // only when it runs (timestamptz arithmetic on an interval is only stable, and would not be).
    // The hour before: rows whose created_at was set back after they were written (tests age rows).
    this.addSql(`create or replace function payments_id_time_from(id text) returns timestamptz
      language sql immutable parallel safe as $$
        select coalesce(payments_id_time(id) - interval '1 hour', '-infinity') $$;`);
    this.addSql(`create or replace function payments_id_time_to(id text) returns timestamptz
      language sql immutable parallel safe as $$
        select coalesce(payments_id_time(id), 'infinity') $$;`);
    this.addSql(`alter table "webhook_deliveries" drop constraint if exists "webhook_deliveries_event_id_foreign";`);
    this.addSql(`alter table "webhook_attempts" drop constraint if exists "webhook_attempts_delivery_id_foreign";`);
    // Instant (a constant default is not written into each row).
    this.addSql(`alter table "webhook_attempts" add column if not exists "delivery_time" timestamptz(3) not null default '-infinity';`);
    // The partitioned tables' keys on the legacy tables; "if not exists": an operator with large
    // tables builds them first, concurrently, under these names.
    this.addSql(`create unique index if not exists "webhook_events_id_created_at_index" on "webhook_events" ("id", "created_at");`);
    this.addSql(`create unique index if not exists "webhook_deliveries_id_created_at_index" on "webhook_deliveries" ("id", "created_at");`);
    this.addSql(`create unique index if not exists "webhook_attempts_delivery_id_number_delivery_time_index" on "webhook_attempts" ("delivery_id", "number", "delivery_time");`);

    this.addSql(`do $$ declare cutover timestamptz; day timestamptz; begin
      ${cutoverOf('webhook_events', 'created_at')}
      -- The key built above becomes the legacy table's (instant), so the attach takes it as its
      -- partition of the parent's key instead of building another.
      alter table webhook_events rename to webhook_events_legacy;
      alter table webhook_events_legacy drop constraint webhook_events_pkey;
      alter table webhook_events_legacy add constraint webhook_events_legacy_pkey primary key using index webhook_events_id_created_at_index;
      create table webhook_events (like webhook_events_legacy including defaults) partition by range (created_at);
      alter table webhook_events add primary key (id, created_at);
      alter table webhook_events add constraint webhook_events_merchant_id_foreign foreign key (merchant_id) references merchants (id) on delete cascade;
      create index on webhook_events (merchant_id, environment, created_at);
      create index on webhook_events (payment_intent_id);
      create index on webhook_events (created_at);
      execute format('alter table webhook_events attach partition webhook_events_legacy for values from (minvalue) to (%L)', cutover);

      ${cutoverOf('webhook_deliveries', 'created_at')}
      drop trigger if exists webhook_deliveries_outbox_notify on webhook_deliveries;
      alter table webhook_deliveries rename to webhook_deliveries_legacy;
      alter table webhook_deliveries_legacy drop constraint webhook_deliveries_pkey;
      alter table webhook_deliveries_legacy add constraint webhook_deliveries_legacy_pkey primary key using index webhook_deliveries_id_created_at_index;
      create table webhook_deliveries (like webhook_deliveries_legacy including defaults) partition by range (created_at);
      alter table webhook_deliveries add primary key (id, created_at);
      alter table webhook_deliveries add constraint webhook_deliveries_merchant_id_foreign foreign key (merchant_id) references merchants (id) on delete cascade;
      alter table webhook_deliveries add constraint webhook_deliveries_endpoint_id_foreign foreign key (endpoint_id) references webhook_endpoints (id) on delete cascade;
      create index on webhook_deliveries (merchant_id, environment, created_at, id);
      create index on webhook_deliveries (endpoint_id, created_at, id);
      create index on webhook_deliveries (event_id, created_at, id);
      create index on webhook_deliveries (status, updated_at);
      create index on webhook_deliveries (created_at) where published_at is null;
      create trigger webhook_deliveries_outbox_notify after insert on webhook_deliveries for each row execute function webhook_deliveries_webhook_deliveries_outbox_notify_fn();
      execute format('alter table webhook_deliveries attach partition webhook_deliveries_legacy for values from (minvalue) to (%L)', cutover);

      ${cutoverOf('webhook_attempts', 'delivery_time')}
      alter table webhook_attempts rename to webhook_attempts_legacy;
      alter table webhook_attempts_legacy drop constraint webhook_attempts_pkey;
      alter table webhook_attempts_legacy add constraint webhook_attempts_legacy_pkey primary key using index webhook_attempts_delivery_id_number_delivery_time_index;
      create table webhook_attempts (like webhook_attempts_legacy including defaults) partition by range (delivery_time);
      alter table webhook_attempts add primary key (delivery_id, number, delivery_time);
      execute format('alter table webhook_attempts attach partition webhook_attempts_legacy for values from (minvalue) to (%L)', cutover);
    end $$;`);
  }

  override down(): void | Promise<void> {
    // Back to plain tables, keyed as before, with every row of every partition (the days' rows are copied into the
    // legacy tables, which become the tables again).
    this.addSql(`do $$ declare t text; p record; begin
      foreach t in array array['webhook_attempts', 'webhook_deliveries', 'webhook_events'] loop
        execute format('alter table %I detach partition %I', t, t || '_legacy');
        execute format('alter table %I drop constraint if exists %I', t || '_legacy', t || '_before_partitions');
        for p in select c.relname from pg_inherits i join pg_class c on c.oid = i.inhrelid where i.inhparent = t::regclass loop
          execute format('alter table %I detach partition %I', t, p.relname);
          execute format('insert into %I select * from %I', t || '_legacy', p.relname);
          execute format('drop table %I', p.relname);
        end loop;
        execute format('drop table %I', t);
        execute format('alter table %I rename to %I', t || '_legacy', t);
        execute format('alter table %I drop constraint if exists %I', t, t || '_legacy_pkey');
      end loop;
    end $$;`);
    this.addSql(`drop index if exists "webhook_attempts_delivery_id_number_delivery_time_index";`);
    this.addSql(`drop index if exists "webhook_deliveries_id_created_at_index";`);
    this.addSql(`drop index if exists "webhook_events_id_created_at_index";`);
    this.addSql(`alter table "webhook_events" add constraint "webhook_events_pkey" primary key ("id");`);
    this.addSql(`alter table "webhook_deliveries" add constraint "webhook_deliveries_pkey" primary key ("id");`);
    this.addSql(`alter table "webhook_attempts" add constraint "webhook_attempts_pkey" primary key ("delivery_id", "number");`);
    this.addSql(`alter table "webhook_attempts" drop column if exists "delivery_time";`);
    this.addSql(`create trigger "webhook_deliveries_outbox_notify" after insert on "webhook_deliveries" for each row execute function "webhook_deliveries_webhook_deliveries_outbox_notify_fn"();`);
    // Not valid: a delivery whose event retention dropped (a replay of a later day), or attempts of
    // one, may be left; the keys hold for what is written from now on.
    this.addSql(`alter table "webhook_attempts" add constraint "webhook_attempts_delivery_id_foreign" foreign key ("delivery_id") references "webhook_deliveries" ("id") on delete cascade not valid;`);
    this.addSql(`alter table "webhook_deliveries" add constraint "webhook_deliveries_event_id_foreign" foreign key ("event_id") references "webhook_events" ("id") on delete cascade not valid;`);
    this.addSql(`drop function if exists payments_id_time_from(text);`);
    this.addSql(`drop function if exists payments_id_time_to(text);`);
    this.addSql(`drop function if exists payments_id_time(text);`);
  }

}
