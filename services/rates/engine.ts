import { Counter, Gauge, type Registry } from "prom-client";
import type { RateSettings } from "../platform/config.ts";
import type { Logger } from "../platform/logger.ts";
import { assets } from "../vocabulary/assets.ts";
import { currencyCodes } from "../vocabulary/currencies.ts";
import { invertRate, parseRate, quoteFrom, rateDecimals, type Answer, type QuoteRule } from "./rate-math.ts";
import { pairName, RefusedAnswer, sourceFor, type Pair, type RateSource } from "./sources.ts";

/** Stablecoins of the US dollar: 1 USD each while the peg setting is on. */
export const usdStablecoins: ReadonlySet<string> = new Set(["USDC", "USDT"]);

/** A quote of one asset in one currency, from the engine's latest answers. */
export interface EngineQuote {
  rate: bigint;
  sources: string[];
}

/**
 * The fewest agreeing sources a Live quote takes, whatever RATE_MIN_SOURCES says: one exchange's
 * word (or that of whoever answers for it) never prices a Live intent. With Live keys in use a
 * lower RATE_MIN_SOURCES stops the start (liveRatesRefusal); this holds for keys made after it.
 */
export const liveMinSources = 2;

/**
 * Why these settings cannot price Live intents in an installation with Live keys, or undefined
 * when they can. RATE_MIN_SOURCES below liveMinSources is refused once an exchange is configured;
 * with the development source alone (RATE_SOURCES=fixed) Live creates in fiat are refused anyway.
 */
export function liveRatesRefusal(settings: RateSettings): string | undefined {
  const exchanges = settings.sources.filter((s) => s !== "fixed");
  if (exchanges.length === 0 || settings.minSources >= liveMinSources) return undefined;
  return (
    `RATE_MIN_SOURCES is ${settings.minSources}${exchanges.length === 1 && settings.sources.length === 1 ? " (the default with one source)" : ""} and this installation has Live keys: ` +
    `a Live quote needs at least ${liveMinSources} sources to agree; set RATE_SOURCES to ${liveMinSources} or more exchanges (kraken,coinbase,bitstamp) and RATE_MIN_SOURCES to ${liveMinSources} or more`
  );
}

/** How long one read of one source may take; a slower source misses this round. */
const readTimeoutMs = 5_000;

/**
 * The rate engine: reads every pair from every configured source in the background, every
 * RATE_REFRESH_SECONDS, and keeps each source's latest good answer. A quote is computed from
 * those in memory, so a create never waits on an exchange (nor fails because one is slow); it
 * fails only when too few fresh sources agree (quoteFrom).
 */
export class RateEngine {
  readonly settings: RateSettings;
  readonly #sources: RateSource[];
  readonly #pairs: Pair[];
  readonly #answers = new Map<string, Answer>();
  readonly #logger: Logger | undefined;
  readonly #metrics: { errors: Counter<"source" | "pair">; outliers: Counter<"source" | "pair"> } | undefined;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #stopped = new AbortController();
  #lastRefresh = 0;
  /** Each source's last round: answering (some pair read), or not, with why (its first failure); absent before its first. */
  readonly #standing = new Map<string, { answering: true } | { answering: false; why: string; unreachable: boolean }>();

  constructor(settings: RateSettings, o: { registry?: Registry; logger?: Logger } = {}) {
    this.settings = settings;
    this.#sources = settings.sources.map((name) => sourceFor(name, settings.urls));
    this.#pairs = pairsToRead(settings.stablecoinPeg);
    this.#logger = o.logger;
    if (o.registry) {
      const answers = this.#answers;
      new Gauge({
        name: "rate_source_answer_age_seconds",
        help: "Age of each rate source's last good answer, per pair: beyond RATE_MAX_AGE_SECONDS it is not used.",
        labelNames: ["source", "pair"],
        registers: [o.registry],
        collect() {
          const now = Date.now();
          for (const [key, a] of answers) this.set({ source: a.source, pair: key.split("|")[1] ?? "" }, (now - a.at) / 1000);
        },
      });
      this.#metrics = {
        errors: new Counter({ name: "rate_source_errors_total", help: "Reads of a rate source that failed (no answer, an error, or no price in it), per pair.", labelNames: ["source", "pair"], registers: [o.registry] }),
        outliers: new Counter({
          name: "rate_source_outliers_total",
          help: "Fresh answers of a rate source dropped as outliers (further than RATE_MAX_SPREAD_BPS from the median), per pair, counted once per refresh.",
          labelNames: ["source", "pair"],
          registers: [o.registry],
        }),
      };
    }
  }

  #rule(environment: "test" | "live"): QuoteRule {
    const minSources = environment === "live" ? Math.max(this.settings.minSources, liveMinSources) : this.settings.minSources;
    return { maxAgeMs: this.settings.maxAgeSeconds * 1000, maxSpreadBps: this.settings.maxSpreadBps, minSources };
  }

  /** Starts the background refresh: once now, then every RATE_REFRESH_SECONDS. */
  start(): void {
    const tick = () => {
      this.#running = this.refresh().finally(() => {
        this.#running = undefined;
        if (!this.#stopped.signal.aborted) this.#timer = setTimeout(tick, this.settings.refreshSeconds * 1000);
      });
    };
    tick();
  }

  async stop(): Promise<void> {
    this.#stopped.abort();
    clearTimeout(this.#timer);
    await this.#running;
  }

  /** Reads every pair from every source once (concurrently); failures are counted and logged, never thrown. */
  async refresh(): Promise<void> {
    const rounds = await Promise.all(
      this.#sources.map(async (source) => {
        const failures = (await Promise.all(this.#pairs.map((pair) => this.#read(source, pair)))).filter((f) => f !== undefined);
        return { source, failures };
      }),
    );
    if (this.#stopped.signal.aborted) return;
    // A source answers when any of its pairs did; one failing them all is down, for its first failure's reason.
    for (const { source, failures } of rounds) this.#stand(source.name, failures.length < this.#pairs.length ? undefined : failures[0]);
    this.#lastRefresh = Date.now();
    for (const environment of ["test", "live"] as const) {
      if (environment === "test" && this.#sources.every((s) => !s.testOnly)) continue;
      for (const pair of this.#pairs) {
        for (const source of quoteFrom(this.#answersOf(pair, environment), Date.now(), this.#rule(environment)).outliers) this.#metrics?.outliers.inc({ source, pair: pairName(pair) });
      }
    }
  }

  /** Reads one pair from one source; why it failed, or undefined when it answered. */
  async #read(source: RateSource, pair: Pair): Promise<Failure | undefined> {
    const signal = AbortSignal.any([AbortSignal.timeout(readTimeoutMs), this.#stopped.signal]);
    try {
      const rate = parseRate(await source.read(pair, signal));
      if (rate === undefined) throw new Error("not a positive decimal");
      this.#answers.set(`${source.name}|${pairName(pair)}`, { source: source.name, rate, at: Date.now() });
      return undefined;
    } catch (err) {
      if (this.#stopped.signal.aborted) return undefined;
      this.#metrics?.errors.inc({ source: source.name, pair: pairName(pair) });
      // An answer that is not the ticker asked for (another pair, or over the size cap) is a
      // source to look at, said at warn; one that is down or slow is counted and said at debug
      // (and once for the whole source while none of its pairs answers: #stand).
      if (err instanceof RefusedAnswer) this.#logger?.warn({ source: source.name, pair: pairName(pair), err: err.message }, "rate source answer refused");
      else this.#logger?.debug({ source: source.name, pair: pairName(pair), err: (err as Error).message }, "rate source read failed");
      return why(err);
    }
  }

  /**
   * Records a source's round, and says when its standing changes: a source none of whose pairs
   * answered is logged once, with why, until it answers again or fails for another reason. Per
   * read, a machine with no route to the exchanges logged nothing above debug, and the operator
   * learnt of it from a merchant's 503.
   */
  #stand(source: string, failed: Failure | undefined): void {
    const before = this.#standing.get(source);
    if (failed === undefined) {
      if (before && !before.answering) this.#logger?.info({ source }, "rate source answers again");
      this.#standing.set(source, { answering: true });
      return;
    }
    if (!before || before.answering || before.why !== failed.why) {
      this.#logger?.warn(
        { source, err: failed.why },
        failed.unreachable
          ? "rate source cannot be reached: fiat-priced creates need RATE_MIN_SOURCES sources that answer (RATE_SOURCES=fixed for development without internet, Test only)"
          : "rate source does not answer: fiat-priced creates need RATE_MIN_SOURCES sources that answer",
      );
    }
    this.#standing.set(source, { answering: false, ...failed });
  }

  /**
   * The sources that did not answer in their last round (none of their pairs), with why, and how
   * many must agree for a quote in the environment: what a refused create, readiness and /readyz say.
   */
  sourcesDown(environment: "test" | "live"): { down: { source: string; why: string }[]; answering: number; minSources: number; offline: boolean } {
    const usable = this.#sources.filter((s) => environment === "test" || !s.testOnly);
    const failing = usable.flatMap((s) => {
      const st = this.#standing.get(s.name);
      return st && !st.answering ? [{ source: s.name, why: st.why, unreachable: st.unreachable }] : [];
    });
    const answering = usable.filter((s) => this.#standing.get(s.name)?.answering).length;
    return {
      down: failing.map(({ source, why }) => ({ source, why })),
      answering,
      minSources: this.#rule(environment).minSources,
      // No source could even be connected to: no route to the exchanges (a machine offline), which
      // waiting does not mend. An exchange answering 503 is reachable, and retrying later helps.
      offline: usable.length > 0 && failing.length === usable.length && failing.every((f) => f.unreachable),
    };
  }

  #answersOf(pair: Pair, environment: "test" | "live"): Answer[] {
    const usable = this.#sources.filter((s) => environment === "test" || !s.testOnly);
    return usable.flatMap((s) => this.#answers.get(`${s.name}|${pairName(pair)}`) ?? []);
  }

  /**
   * The rate of one unit of `asset` in `currency` (units of the currency per unit), or undefined
   * when too few fresh sources agree. A USD stablecoin is 1 USD while pegged; in another currency
   * it is the dollar's rate in that currency.
   */
  quote(asset: string, currency: string, environment: "test" | "live", now = Date.now()): EngineQuote | undefined {
    if (this.settings.stablecoinPeg && usdStablecoins.has(asset)) {
      if (currency === "USD") return { rate: 10n ** BigInt(rateDecimals), sources: ["peg"] };
      // The sources quote the currency in dollars (EUR-USD): a dollar in it is the inverse.
      const q = quoteFrom(this.#answersOf({ base: currency, quote: "USD" }, environment), now, this.#rule(environment));
      return q.ok ? { rate: invertRate(q.rate), sources: q.sources } : undefined;
    }
    const q = quoteFrom(this.#answersOf({ base: asset, quote: currency }, environment), now, this.#rule(environment));
    return q.ok ? { rate: q.rate, sources: q.sources } : undefined;
  }

  /** When a refused quote is worth asking for again: at the next refresh. */
  retryAfterSeconds(now = Date.now()): number {
    const next = this.#lastRefresh + this.settings.refreshSeconds * 1000;
    return Math.max(1, Math.ceil((next - now) / 1000));
  }

  /** Whether every pair quotes in the environment now (go-live readiness asks it of Live). */
  fresh(environment: "test" | "live", now = Date.now()): { ok: boolean; failing: string[] } {
    const failing = this.#pairs.filter((p) => !quoteFrom(this.#answersOf(p, environment), now, this.#rule(environment)).ok).map(pairName);
    return { ok: failing.length === 0, failing };
  }
}

/**
 * What /readyz warns of while fewer sources answer than a Test quote needs (the least of the two
 * environments'), or undefined: each source not answering, with why, and what to do offline.
 */
export function ratesWarning(rates: RateEngine): string | undefined {
  const state = rates.sourcesDown("test");
  if (state.answering >= state.minSources || state.down.length === 0) return undefined;
  return (
    `exchange rates: ${state.answering} of RATE_SOURCES answer${state.answering === 1 ? "s" : ""}, ${state.minSources} must agree (RATE_MIN_SOURCES); not answering: ${sourcesDownText(state.down)}: fiat-priced creates are refused` +
    (state.offline ? "; none can be reached (for development without internet: RATE_SOURCES=fixed, Test only)" : "")
  );
}

/** The sources not answering as a refused create and /readyz name them: "kraken (HTTP 503), coinbase (fetch failed (ENOTFOUND))". */
export function sourcesDownText(down: readonly { source: string; why: string }[]): string {
  return down.map((d) => `${d.source} (${d.why})`).join(", ");
}

/** Why a read failed; unreachable: no connection was made (no route, no name, refused, or no answer in time). */
interface Failure {
  why: string;
  unreachable: boolean;
}

/** Why a read failed, short and with no URL: "fetch failed (ECONNREFUSED)", "HTTP 503", a timeout. */
function why(err: unknown): Failure {
  const e = err as Error & { cause?: { code?: string; message?: string } };
  if (e.name === "TimeoutError") return { why: `no answer within ${readTimeoutMs / 1000} s`, unreachable: true };
  const cause = e.cause?.code ?? e.cause?.message;
  // undici's fetch rejects with "fetch failed" and the socket's error as its cause when it could not connect.
  return { why: (cause ? `${e.message} (${cause})` : e.message).slice(0, 200), unreachable: e.message === "fetch failed" };
}

/** Every pair a quote may need: each asset that is not a pegged stablecoin in each currency, and each other currency in dollars. */
export function pairsToRead(stablecoinPeg: boolean): Pair[] {
  const bases = [...new Set(assets.map((a) => a.asset))].filter((a) => !(stablecoinPeg && usdStablecoins.has(a)));
  const pairs = bases.flatMap((base) => currencyCodes.map((quote) => ({ base, quote })));
  if (stablecoinPeg) for (const c of currencyCodes) if (c !== "USD") pairs.push({ base: c, quote: "USD" });
  return pairs;
}
