// Shared rate limits that cost the database a statement per interval, not per call (issue 66):
// against the real rate_limit_buckets table, each "process" a SharedBuckets of its own on the
// same database, every statement counted. A busy key takes tokens ahead and answers from them; a
// budget nearing its limit is counted call by call, so processes together never grant more than
// the budget, and a quiet key is never refused for tokens another process holds.
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import t from "tap";
import { createLogger } from "../../services/platform/logger.ts";
import { SharedBuckets, type RunStatement } from "../../services/platform/rate-limit.ts";
import { startTestApp } from "../helpers/harness.ts";

const s = await startTestApp(t, {}, ["rpc"]);
const pool = new pg.Pool({ connectionString: s.databaseUrl, max: 4 });
t.teardown(() => pool.end());
const logger = createLogger("silent");

/** A process's shared buckets on the test's database, with its takes counted (not the once-a-minute sweep). */
function processOnDatabase() {
  const counted = { statements: 0 };
  const run: RunStatement = async <T>(sql: string, params: readonly unknown[]) => {
    if (sql.includes("insert into rate_limit_buckets")) counted.statements++;
    return (await pool.query(sql, params as unknown[])).rows as T[];
  };
  return { buckets: new SharedBuckets(run, logger), counted };
}

t.test("a key making 300 calls a second: every call served, some 10 statements a second instead of 300", async (t) => {
  const p = processOnDatabase();
  const budget = p.buckets.budget("api-writes", 1_000, 1);
  const waits: number[] = [];
  const started = Date.now();
  // 300 calls over a second, a few at a time, as requests arrive.
  for (let i = 0; i < 100; i++) {
    waits.push(...(await Promise.all([budget.take("key_busy"), budget.take("key_busy"), budget.take("key_busy")])));
    await sleep(Math.max(0, started + (i + 1) * 10 - Date.now()));
  }
  t.equal(waits.filter((w) => w === 0).length, 300, "all 300 within the budget of 1 000 a second");
  t.ok(p.counted.statements <= 60, `${p.counted.statements} statements for 300 calls (one per call without leases)`);
});

t.test("two processes, one budget of 400 an hour: a busy one leases from the upper half, both are counted call by call in the lower; never more than 400 granted", async (t) => {
  const a = processOnDatabase();
  const b = processOnDatabase();
  const budgets = [a.buckets.budget("api-reads", 400, 3600), b.buckets.budget("api-reads", 400, 3600)];
  let granted = 0;
  let refused = 0;
  const take = async (i: number) => ((await budgets[i]!.take("key_shared")) === 0 ? granted++ : refused++);
  // Process a busy for half a second: 3 calls every 10 ms, leasing while the bucket is over half full.
  const started = Date.now();
  for (let i = 0; i < 50; i++) {
    await Promise.all([take(0), take(0), take(0)]);
    await sleep(Math.max(0, started + (i + 1) * 10 - Date.now()));
  }
  const busy = a.counted.statements;
  t.ok(busy < 75, `process a: ${busy} statements for its first 150 calls`);
  // Then both, in turns, past the budget: the rest of it is counted call by call.
  for (let i = 0; i < 400; i++) await take(i % 2);
  t.ok(granted <= 400, `${granted} granted: never more than the budget`);
  // What a lapsed lease held is lost to the calls, at most a window's worth, and only from the upper half.
  t.ok(granted >= 400 - 40, `${granted} of 400 granted`);
  t.equal(granted + refused, 550);
  const [row] = (await pool.query<{ tokens: number }>(`select tokens from rate_limit_buckets where key = 'api-reads key_shared'`)).rows;
  t.ok(row !== undefined && row.tokens < 1, "the bucket is empty: the processes drew from one budget");
});

t.test("a key nearing its limit is counted call by call: 12 calls from two processes on a budget of 10, exactly 10 served", async (t) => {
  const a = processOnDatabase();
  const b = processOnDatabase();
  const budgets = [a.buckets.budget("site-reads", 10, 3600), b.buckets.budget("site-reads", 10, 3600)];
  // Quiet: one call at a time, 120 ms apart, so no window holds more than one and none asks ahead.
  const answers: number[] = [];
  for (let i = 0; i < 12; i++) {
    answers.push(await budgets[i % 2]!.take("key_quiet"));
    await sleep(120);
  }
  t.equal(answers.filter((w) => w === 0).length, 10);
  t.ok(answers.slice(10).every((w) => w > 0), "the 11th and 12th refused, with a wait");
  t.equal(a.counted.statements + b.counted.statements, 12, "a statement per call: nothing taken ahead");
});
