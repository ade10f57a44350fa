import { Migration } from '@mikro-orm/migrations';

export class Migration20261201230000_ResumeSpentOnItsHalt extends Migration {

  override name = 'Migration20261201230000_ResumeSpentOnItsHalt';

  override up(): void | Promise<void> {
    this.addSql(`alter table "chain_watchers" add column "halted_branch_height" bigint null, add column "halted_branch_hash" varchar(200) null, add column "accept_reorg_height" bigint null, add column "accept_reorg_hash" varchar(200) null, add column "accept_reorg_until" timestamptz(3) null;`);
    // A resume armed before this migration names no halt and never lapsed: it may be weeks old
    // (issue 60), so it is spent now. A chain whose fork it was meant for stops again at that
    // fork, and is resumed again.
    this.addSql(`update "chain_watchers" set "accept_reorg" = false where "accept_reorg";`);
  }

  override down(): void | Promise<void> {
    this.addSql(`alter table "chain_watchers" drop column "halted_branch_height", drop column "halted_branch_hash", drop column "accept_reorg_height", drop column "accept_reorg_hash", drop column "accept_reorg_until";`);
  }

}
