import t from "tap";
import { RateLimiter, TokenBuckets } from "../../services/platform/rate-limit.ts";

t.test("a fixed window per client address", async (t) => {
  const limiter = new RateLimiter(3);
  const start = Date.UTC(2026, 0, 1, 12, 0, 10);
  t.same([1, 2, 3].map(() => limiter.take("a", start)), [0, 0, 0], "three calls in the minute");
  t.equal(limiter.take("a", start), 50, "the fourth waits for the next minute: 50 s");
  t.equal(limiter.take("b", start), 0, "another address has its own count");
  t.equal(limiter.take("a", start + 49_500), 1, "never less than a second");
  t.equal(limiter.take("a", start + 50_000), 0, "a new minute, a new count");
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
