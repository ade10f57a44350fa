import t from "tap";
import { RateLimiter } from "../../services/platform/rate-limit.ts";

t.test("a fixed window per client address", async (t) => {
  const limiter = new RateLimiter(3);
  const start = Date.UTC(2026, 0, 1, 12, 0, 10);
  t.same([1, 2, 3].map(() => limiter.take("a", start)), [0, 0, 0], "three calls in the minute");
  t.equal(limiter.take("a", start), 50, "the fourth waits for the next minute: 50 s");
  t.equal(limiter.take("b", start), 0, "another address has its own count");
  t.equal(limiter.take("a", start + 49_500), 1, "never less than a second");
  t.equal(limiter.take("a", start + 50_000), 0, "a new minute, a new count");
});
