import t from "tap";
import { createLogger } from "../../services/platform/logger.ts";
import { SharedBuckets, TokenBuckets } from "../../services/platform/rate-limit.ts";

t.test("a per-minute budget is a token bucket, not a window: no double burst across a minute's edge", async (t) => {
  const limiter = new TokenBuckets(3, 60);
  const edge = Date.UTC(2026, 0, 1, 12, 0, 59, 900);
  t.same([1, 2, 3].map(() => limiter.take("a", edge)), [0, 0, 0], "three calls at once");
  t.equal(limiter.take("a", edge + 200), 20, "200 ms later, in the next minute, the fourth still waits for its refill: one call every 20 s");
  t.equal(limiter.take("b", edge), 0, "another client has its own bucket");
  t.equal(limiter.take("a", edge + 19_500), 1, "never less than a second");
  t.equal(limiter.take("a", edge + 20_000), 0, "one call refilled");
  t.equal(limiter.take("a", edge + 20_000), 20, "and only one");
});

t.test("memory is bounded: past the most buckets, the least recently used goes", async (t) => {
  const buckets = new TokenBuckets(1, 60, 3);
  const now = Date.UTC(2026, 0, 1, 12, 0, 10);
  for (const client of ["a", "b", "c"]) buckets.take(client, now);
  t.equal(buckets.take("a", now + 1), 60, "a is empty (and now the most recently used)");
  buckets.take("d", now + 2);
  t.equal(buckets.size, 3, "never more than three");
  t.equal(buckets.take("a", now + 3), 60, "a was kept: b, the least recently used, went");
  t.equal(buckets.take("b", now + 4), 0, "b starts again from a full bucket");
  for (let i = 0; i < 10_000; i++) buckets.take(`ip${i}`, now + 5);
  t.equal(buckets.size, 3, "a flood of new clients keeps it at three");
});

t.test("a token bucket per API key: 100 a second, the 101st in the second refused", async (t) => {
  const buckets = new TokenBuckets(100);
  const start = Date.UTC(2026, 0, 1, 12, 0, 10);
  let allowed = 0;
  for (let i = 0; i < 100; i++) if (buckets.take("key_a", start) === 0) allowed++;
  t.equal(allowed, 100, "a burst of 100 at once");
  t.equal(buckets.take("key_a", start + 5), 1, "the 101st within the same 10 ms waits: Retry-After 1 s");
  t.equal(buckets.take("key_b", start + 5), 0, "another key has its own bucket");
  t.equal(buckets.take("key_a", start + 10), 0, "10 ms later one more call has refilled");
  t.equal(buckets.take("key_a", start + 11), 1, "and only one");
  t.equal(buckets.take("key_a", start + 1_200), 0, "a quiet second refills it");
});

t.test("a bucket over a longer period waits its refill", async (t) => {
  const buckets = new TokenBuckets(5, 3600);
  const start = Date.UTC(2026, 0, 1, 12, 0, 10);
  t.same([1, 2, 3, 4, 5].map(() => buckets.take("k", start)), [0, 0, 0, 0, 0]);
  t.equal(buckets.take("k", start), 720, "one call refills every 720 s");
  t.equal(buckets.take("k", start + 360_000), 360, "half way");
  t.equal(buckets.take("k", start + 720_000), 0);
  t.equal(buckets.take("k", start + 7_200_000), 0, "and idle buckets are dropped when full");
});

t.test("shared buckets that cannot be reached: each process keeps its share of the budget, never unlimited", async (t) => {
  let now = Date.UTC(2026, 0, 1, 12, 0, 10);
  let calls = 0;
  const logger = createLogger("silent");
  const down = new SharedBuckets(
    async () => {
      calls++;
      throw new Error("connect ECONNREFUSED 127.0.0.1:5432");
    },
    logger,
    { processes: 3, now: () => now },
  );
  const budget = down.budget("api-writes", 30, 3600);
  const answers = [];
  for (let i = 0; i < 12; i++) answers.push(await budget.take("key_a"));
  t.equal(answers.filter((w) => w === 0).length, 10, "a third of 30 in this process");
  t.ok(answers.slice(10).every((w) => w > 0), "then refused, with a wait");
  t.equal(calls, 1, "after a failure, takes stay local for a while instead of each waiting on the store");
  now += 5_001;
  await budget.take("key_a");
  t.equal(calls, 2, "then the store is tried again");

  const hanging = new SharedBuckets(() => new Promise<never>(() => undefined), logger, { timeoutMs: 50, processes: 2 });
  const slow = hanging.budget("public", 4, 60);
  t.equal(await slow.take("203.0.113.7"), 0, "a store that does not answer in time: counted locally");
  t.equal(await slow.take("203.0.113.7"), 0);
  t.ok((await slow.take("203.0.113.7")) > 0, "with half of the budget of 4");
  t.ok(hanging.local, "and it says so");
});
