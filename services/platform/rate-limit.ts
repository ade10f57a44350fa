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
