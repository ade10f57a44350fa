import { Migration } from '@mikro-orm/migrations';

export class Migration20261123170137_CredentialChangedNotify extends Migration {

  override name = 'Migration20261123170137_CredentialChangedNotify';

  override up(): void | Promise<void> {
    this.addSql(`create or replace function "internal_credentials_internal_credentials_credential_changed_fn"() returns trigger as \$\$ begin perform pg_notify('credential_changed', old.secret_hash); return null; end; \$\$ language plpgsql;`);
    this.addSql(`create trigger "internal_credentials_credential_changed" AFTER UPDATE OR DELETE on "internal_credentials" for each ROW execute function "internal_credentials_internal_credentials_credential_changed_fn"();`);

    this.addSql(`create or replace function "cashier_sessions_cashier_sessions_credential_changed_fn"() returns trigger as \$\$ begin perform pg_notify('credential_changed', old.secret_hash); return null; end; \$\$ language plpgsql;`);
    this.addSql(`create trigger "cashier_sessions_credential_changed" AFTER UPDATE OR DELETE on "cashier_sessions" for each ROW execute function "cashier_sessions_cashier_sessions_credential_changed_fn"();`);

    this.addSql(`create or replace function "api_keys_api_keys_credential_changed_fn"() returns trigger as \$\$ begin perform pg_notify('credential_changed', old.secret_hash); return null; end; \$\$ language plpgsql;`);
    this.addSql(`create trigger "api_keys_credential_changed" AFTER UPDATE OR DELETE on "api_keys" for each ROW execute function "api_keys_api_keys_credential_changed_fn"();`);

    this.addSql(`create or replace function "site_credentials_site_credentials_credential_changed_fn"() returns trigger as \$\$ begin perform pg_notify('credential_changed', old.secret_hash); return null; end; \$\$ language plpgsql;`);
    this.addSql(`create trigger "site_credentials_credential_changed" AFTER UPDATE OR DELETE on "site_credentials" for each ROW execute function "site_credentials_site_credentials_credential_changed_fn"();`);
  }

  override down(): void | Promise<void> {
    this.addSql(`drop trigger if exists "api_keys_credential_changed" on "api_keys";`);
    this.addSql(`drop function if exists "api_keys_api_keys_credential_changed_fn"();`);

    this.addSql(`drop trigger if exists "cashier_sessions_credential_changed" on "cashier_sessions";`);
    this.addSql(`drop function if exists "cashier_sessions_cashier_sessions_credential_changed_fn"();`);

    this.addSql(`drop trigger if exists "internal_credentials_credential_changed" on "internal_credentials";`);
    this.addSql(`drop function if exists "internal_credentials_internal_credentials_credential_changed_fn"();`);

    this.addSql(`drop trigger if exists "site_credentials_credential_changed" on "site_credentials";`);
    this.addSql(`drop function if exists "site_credentials_site_credentials_credential_changed_fn"();`);
  }

}
