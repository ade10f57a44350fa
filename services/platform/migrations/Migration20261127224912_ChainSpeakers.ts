import { Migration } from '@mikro-orm/migrations';

export class Migration20261127224912_ChainSpeakers extends Migration {

  override name = 'Migration20261127224912_ChainSpeakers';

  override up(): void | Promise<void> {
    // The credential that claimed a chain's lease: a report is admitted only under it. A lease held
    // before this migration has none, so only its lapse (at most lease_seconds) lets it be claimed.
    this.addSql(`alter table "chain_watchers" add "credential_id" varchar(64) null;`);

    // The networks an observe credential may speak for; null (every credential so far): only
    // networks no built-in watcher follows.
    this.addSql(`alter table "internal_credentials" add "networks" text[] null;`);

    // Credentials issued before roles and environments (Migration20261124152937 gave them
    // {observe, admin} and no environment) lose what they were never given: no role at all. They
    // must be issued anew (admin internal-credential list shows them as needing it). The
    // credential_changed trigger drops them from every process's cache.
    this.addSql(`update "internal_credentials" set "roles" = '{}' where "environment" is null and "roles" <> '{}';`);
  }

  override down(): void | Promise<void> {
    // The roles taken from pre-roles credentials are not given back.
    this.addSql(`alter table "chain_watchers" drop column "credential_id";`);
    this.addSql(`alter table "internal_credentials" drop column "networks";`);
  }

}
