import { Migration } from '@mikro-orm/migrations';

/** Every scope a link's session took before links named theirs (services/auth/keys.ts then). */
export const everyScopeBefore = ['payment_intents:read', 'payment_intents:write', 'webhooks:read', 'webhooks:write', 'merchant:readiness'];

export class Migration20261202170000_DashboardLinkScopes extends Migration {

  override name = 'Migration20261202170000_DashboardLinkScopes';

  override up(): void | Promise<void> {
    // A link names the scopes its session gets (read-only by default, admin dashboard-link
    // --scopes); a link can be revoked, and its session ends with it. Links issued before got every
    // scope (read_only taking the writes away): they keep exactly that until they expire (7 days at most).
    this.addSql(`alter table "dashboard_links" add column "scopes" text[] null, add column "revoked_at" timestamptz(3) null;`);
    this.addSql(`update "dashboard_links" set "scopes" = '{${everyScopeBefore.join(',')}}';`);
    this.addSql(`alter table "dashboard_links" alter column "scopes" set not null;`);
  }

  override down(): void | Promise<void> {
    this.addSql(`alter table "dashboard_links" drop column "scopes", drop column "revoked_at";`);
  }

}
