// The entities and the migrations describe the same schema: on a database with every migration
// applied, the schema generator finds nothing to change. Otherwise `npm run migration:create`
// writes that difference into the next migration: it once would have dropped the three tables
// kept by plain SQL (rate limits, endpoint circuits and slots) and a partial index the mempool
// check reads by.
import t from "tap";
import { openDatabase } from "../../services/app/database.ts";
import { createTestDatabase } from "../helpers/harness.ts";

const db = await openDatabase(await createTestDatabase(t));
t.teardown(() => db.close());
await db.migrator.up();

t.test("a migrated database matches the entities: a generated migration would be empty", async (t) => {
  const sql = await db.schema.getUpdateSchemaSQL({ wrap: false });
  t.equal(sql.trim(), "", `no difference (the generator would write: ${sql.trim().slice(0, 2000)})`);
});

t.test("the tables kept by plain SQL are there, and the generator leaves them alone", async (t) => {
  const rows = await db.em.fork().execute<{ table_name: string }[]>(
    `select table_name from information_schema.tables where table_name in ('rate_limit_buckets', 'webhook_endpoint_circuits', 'webhook_endpoint_slots') order by table_name`,
  );
  t.same(rows.map((r) => r.table_name), ["rate_limit_buckets", "webhook_endpoint_circuits", "webhook_endpoint_slots"]);
  t.notMatch(await db.schema.getUpdateSchemaSQL({ wrap: false }), /drop table/, "none is dropped");
});
