/**
 * A fixed-window limit per client (an address or a credential): at most `perMinute` calls in
 * each minute. In memory, per process; windows of idle clients are dropped as they pass.
 */
export class RateLimiter {
  private readonly perMinute: number;
  private windowStart = 0;
  private counts = new Map<string, number>();

  constructor(perMinute: number) {
    this.perMinute = perMinute;
  }

  /** Takes one call for `client`: 0 if allowed, else the seconds until the next window. */
  take(client: string, now = Date.now()): number {
    const window = Math.floor(now / 60_000) * 60_000;
    if (window !== this.windowStart) {
      this.windowStart = window;
      this.counts = new Map();
    }
    const used = this.counts.get(client) ?? 0;
    if (used >= this.perMinute) return Math.max(1, Math.ceil((window + 60_000 - now) / 1000));
    this.counts.set(client, used + 1);
    return 0;
  }
}

/**
 * A token bucket per client (an API key): it holds at most `limit` calls and refills evenly,
 * `limit` every `seconds` (100 a second: one call every 10 ms, and a burst of 100 after a quiet
 * second). In memory, per process; a full bucket is forgotten.
 */
export class TokenBuckets {
  readonly limit: number;
  private readonly perMs: number;
  private buckets = new Map<string, { tokens: number; at: number }>();
  private sweptAt = 0;

  constructor(limit: number, seconds = 1) {
    this.limit = limit;
    this.perMs = limit / (seconds * 1000);
  }

  /** Takes one call for `client`: 0 if allowed, else the whole seconds until one is (at least 1). */
  take(client: string, now = Date.now()): number {
    this.sweep(now);
    const bucket = this.buckets.get(client);
    const tokens = bucket ? Math.min(this.limit, bucket.tokens + (now - bucket.at) * this.perMs) : this.limit;
    if (tokens < 1) {
      if (bucket) Object.assign(bucket, { tokens, at: now });
      return Math.max(1, Math.ceil((1 - tokens) / this.perMs / 1000));
    }
    this.buckets.set(client, { tokens: tokens - 1, at: now });
    return 0;
  }

  /** Drops the buckets that have refilled, at most once a minute. */
  private sweep(now: number): void {
    if (now - this.sweptAt < 60_000) return;
    this.sweptAt = now;
    for (const [client, b] of this.buckets) if (b.tokens + (now - b.at) * this.perMs >= this.limit) this.buckets.delete(client);
  }
}
