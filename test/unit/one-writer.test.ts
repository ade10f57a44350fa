// Each of webhook_deliveries, webhook_attempts, webhook_endpoint_slots and webhook_endpoint_circuits
// is written by one module (scripts/table-writers.ts names them): the check finds no other writer in
// this tree, and finds each kind of stray write planted in a copy of a small tree.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import t from "tap";
import { describeStray, strayWrites } from "../../scripts/table-writers.ts";

const root = path.resolve(import.meta.dirname, "../..");

t.test("only their owners write the delivery tables and the shared gate's", async (t) => {
  const stray = strayWrites(root);
  t.same(stray.map(describeStray), [], stray.map(describeStray).join("\n"));
});

function tree(files: Record<string, string>): string {
  const dir = mkdtempSync(path.join(tmpdir(), "writers-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
    writeFileSync(path.join(dir, name), text);
  }
  return dir;
}

t.test("a write from another file is found, with its file, line and table", async (t) => {
  const owner = {
    "services/delivery/webhook-deliveries.ts": "export const sql = `insert into webhook_deliveries (id) values (?)`;\n",
    "services/delivery/shared-gate.ts": "export const sql = `delete from webhook_endpoint_slots where holder = ?`;\n",
    // The schema's history may write anything.
    "services/platform/migrations/Migration1.ts": "this.addSql(`update webhook_deliveries set cause = 'event'`);\n",
    // Reads, prose and partition DDL are not writes.
    "services/webhooks/deliveries.ts": "// an update joined to its subquery\nexport const q = `select * from webhook_deliveries d where d.id = ?`;\n",
    "services/retention/partitions.ts": 'export const q = `alter table "webhook_deliveries" detach partition "webhook_deliveries_p20261201" concurrently`;\n',
  };
  t.same(strayWrites(tree(owner)), [], "owners, migrations, reads and DDL: nothing stray");

  const planted = tree({
    ...owner,
    "services/events/record.ts": "export const a = `\n  insert into\n    webhook_deliveries (id) select 1`;\n",
    "services/webhooks/recovery.ts": "export const b = `UPDATE \"webhook_attempts\" set error = null`;\n",
    "services/retention/job.ts": "export const c = `delete from webhook_deliveries_legacy where id = ?`;\n",
    "services/webhooks/operations.ts": "export const d = `delete from webhook_endpoint_circuits where endpoint_id = ?`;\n",
    "services/webhooks/service.ts": "await em.nativeUpdate(WebhookDeliveryRecord, {}, {});\n",
  });
  const found = strayWrites(planted).map((w) => `${w.file}:${w.line} ${w.table}`).sort();
  t.same(found, [
    "services/events/record.ts:2 webhook_deliveries",
    "services/retention/job.ts:1 webhook_deliveries",
    "services/webhooks/operations.ts:1 webhook_endpoint_circuits",
    "services/webhooks/recovery.ts:1 webhook_attempts",
    "services/webhooks/service.ts:1 webhook_deliveries",
  ]);
  t.match(describeStray(strayWrites(planted)[0]!), /only services\/delivery\/(webhook-deliveries|shared-gate)\.ts writes/);
});
