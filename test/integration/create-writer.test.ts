// The creates' shared statements (intents/create-batch.ts CreateWriter) against PostgreSQL, with
// parts of our own in place of a create's CTEs, so that which writes share a statement is
// decided by this test (they are asked for in one turn of the event loop) and read back from
// each row's transaction id: what shares, what one write's failure does to the others, how long a
// write waits for a lock beside others, and the database going away under a statement.
import pg from "pg";
import t from "tap";
import { openDatabase } from "../../services/app/database.ts";
import { CreateWriter, type CreateWrite } from "../../services/intents/create-batch.ts";
import { createTestDatabase } from "../helpers/harness.ts";

const url = await createTestDatabase(t);
const db = await openDatabase(url, 10);
t.teardown(() => db.close());
await db.em.fork().execute(`create table writes (n int primary key check (n <> 13))`);

/** A write of `n` into `writes`, answering its row's transaction; waits for locks as a create's key does. */
const write = (n: number, o: { shape?: string; sql?: string } = {}): CreateWrite => ({
  em: db.em.fork(),
  shape: o.shape ?? "plain",
  key: `k${n}`,
  build: (s, lockTimeoutMs) => ({
    ctes: `timeout${s} as (select set_config('lock_timeout', '${lockTimeoutMs ?? 10_000}ms', true)),
           written${s} as (insert into writes (n) select ?::int from timeout${s}${o.sql ?? ""} returning n, xmin::text as tx)`,
    answer: `written${s}.n, written${s}.tx from written${s}`,
    params: [n],
  }),
});

type Answer = { n: number; tx: string };
const settle = (writer: CreateWriter, writes: CreateWrite[]) => Promise.allSettled(writes.map((w) => writer.write(w) as Promise<Answer>));
const valueOf = (r: PromiseSettledResult<Answer> | undefined) => (r?.status === "fulfilled" ? r.value : undefined);
const stored = async (from: number, to: number) =>
  (await db.em.fork().execute<{ n: number }[]>(`select n from writes where n between ? and ? order by n`, [from, to])).map((r) => r.n);

t.test("writes asked for in one turn share one statement; each gets its own answer", async (t) => {
  const answers = await settle(new CreateWriter(), [1, 2, 3, 4, 5, 6, 7, 8].map((n) => write(n)));
  t.same(answers.map((a) => valueOf(a)?.n), [1, 2, 3, 4, 5, 6, 7, 8], "each its own row");
  t.equal(new Set(answers.map((a) => valueOf(a)?.tx)).size, 1, "in one transaction");
  const lone = await new CreateWriter().write(write(9));
  t.equal((lone as Answer).n, 9, "a lone write is written");
});

t.test("shapes apart, and five in 4 + 1", async (t) => {
  const answers = await settle(new CreateWriter(), [write(31, { shape: "a" }), write(32, { shape: "b" }), write(33, { shape: "a" }), write(34, { shape: "b" }), write(35, { shape: "a" })]);
  const tx = answers.map((a) => valueOf(a)?.tx);
  t.ok(tx.every((x) => x !== undefined), "all written");
  t.equal(new Set(tx).size, 3, "three statements: a ×2 (of three: 2 + 1), b ×2");
  t.equal(tx[0], tx[2], "a's first two together");
  t.equal(tx[1], tx[3], "b's together");
});

t.test("one write the database refuses fails alone: the others are written again one at a time", async (t) => {
  const answers = await settle(new CreateWriter(), [10, 11, 12, 13, 14, 15, 16, 17].map((n) => write(n)));
  t.same(answers.map((a) => a.status), ["fulfilled", "fulfilled", "fulfilled", "rejected", "fulfilled", "fulfilled", "fulfilled", "fulfilled"]);
  const refused = answers[3] as PromiseRejectedResult;
  t.equal((refused.reason as { code?: string }).code, "23514", "the refused write gets its own error (the check)");
  t.equal(new Set(answers.flatMap((a) => valueOf(a)?.tx ?? [])).size, 7, "each of the seven in a statement of its own");
  t.same(await stored(10, 17), [10, 11, 12, 14, 15, 16, 17], "the seven, and not the refused one");
});

t.test("a lock another transaction holds: the writes beside it are answered at once, it waits as alone", async (t) => {
  const holder = new pg.Client({ connectionString: url });
  await holder.connect();
  t.teardown(() => holder.end());
  await holder.query("begin");
  await holder.query("insert into writes (n) values (20)");
  const writer = new CreateWriter();
  const pending = [20, 21, 22, 23, 24, 25, 26, 27].map((n) => writer.write(write(n)) as Promise<Answer>);
  pending[0]?.catch(() => undefined);
  // The usual wait for a lock is 10 s: the seven must not take it.
  const others = await Promise.race([
    Promise.all(pending.slice(1)),
    new Promise<never>((_, reject) => setTimeout(() => reject(new Error("the writes beside a held lock waited for it")), 9_000).unref()),
  ]);
  t.same(others.map((a) => a.n), [21, 22, 23, 24, 25, 26, 27], "the seven answered while the lock is held");
  let settled = false;
  void pending[0]?.finally(() => (settled = true));
  // A sentinel after them: the held write has not been answered meanwhile.
  await db.em.fork().execute("select 1");
  t.notOk(settled, "the held write still waits");
  await holder.query("rollback");
  t.equal((await pending[0])?.n, 20, "written once the other transaction gave the lock up");
});

t.test("the database going away under a shared statement fails every write of it, none written again", async (t) => {
  const kill = ` where pg_terminate_backend(pg_backend_pid())`;
  const answers = await settle(new CreateWriter(), [write(40), write(41, { sql: kill }), write(42), write(43)]);
  t.same(answers.map((a) => a.status), ["rejected", "rejected", "rejected", "rejected"], "all four fail");
  t.same(await stored(40, 43), [], "nothing written");
  // The pool goes on with other connections.
  t.equal(((await new CreateWriter().write(write(44))) as Answer).n, 44, "the next write is written");
});
