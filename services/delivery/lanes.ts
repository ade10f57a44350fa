/**
 * Which lane a delivery's message takes. JetStream hands a consumer's messages out in the order
 * they were published, so whatever a worker does with them (fairness.ts), a message published
 * behind a flood is reached only once the worker has gone past the flood: 105 600 deliveries to 64
 * endpoints answering 503 kept another merchant's first attempts 0.6–2 s behind them for the first
 * minute of the backlog bench. So the stream has two subjects, each with a consumer of its own
 * that every worker pulls at once (worker.ts): the main lane, and the backlog lane for each
 * merchant's messages beyond its share of the main one. A merchant sending within its share
 * (LaneShare) never waits behind another's flood, however large; a busier one's surplus waits
 * behind other surpluses, shared out by the worker as before. Which lane a message took changes
 * nothing else: the same delivery, schedule, claim and order rules.
 *
 * The share is per merchant (not per endpoint: one merchant's 16 failing endpoints would take 16
 * shares) and per relay process, as a token bucket kept in memory: no database read or write per
 * message, and with several relays a merchant's share is at most that many times larger.
 */
export interface LaneShare {
  /** Messages a second a merchant may publish on the main lane, on average. */
  perSecond: number;
  /** The most at once (a burst), and the bucket's size. */
  burst: number;
}

/**
 * WEBHOOK_MAIN_LANE_PER_SECOND, with bursts of 5 s' worth. Its default, 40 a second with bursts of
 * 200: twice the steady merchant's 20 a second in the backlog bench, and a burst of 200 first
 * attempts is gone from the main lane in well under a second.
 */
export function laneShare(perSecond: number): LaneShare {
  return { perSecond, burst: perSecond * 5 };
}

export const defaultLaneShare: LaneShare = laneShare(40);

export type Lane = "main" | "backlog";

/** The relay's buckets, one per merchant that published recently. */
export class Lanes {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();
  private readonly share: LaneShare;
  private readonly now: () => number;

  constructor(share: LaneShare = defaultLaneShare, now: () => number = () => performance.now()) {
    this.share = share;
    this.now = now;
  }

  /** The lane of the merchant's next message: main while its bucket holds a token (taken), else backlog. */
  take(merchant: string): Lane {
    const now = this.now();
    const b = this.buckets.get(merchant);
    const tokens = b === undefined ? this.share.burst : Math.min(this.share.burst, b.tokens + ((now - b.at) / 1000) * this.share.perSecond);
    if (tokens < 1) {
      this.buckets.set(merchant, { tokens, at: now });
      return "backlog";
    }
    this.buckets.set(merchant, { tokens: tokens - 1, at: now });
    if (this.buckets.size > 10_000) this.forgetFull(now);
    return "main";
  }

  /** Drops the buckets that have filled again: a merchant not seen is a full bucket. */
  private forgetFull(now: number): void {
    for (const [merchant, b] of this.buckets) {
      if (b.tokens + ((now - b.at) / 1000) * this.share.perSecond >= this.share.burst) this.buckets.delete(merchant);
    }
  }
}
