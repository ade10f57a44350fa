import t from "tap";
import { amountForPrice, applySpread, formatRate, invertRate, median, parseRate, quoteFrom, valueAtRate, type Answer } from "../../services/rates/rate-math.ts";

const r = (s: string) => parseRate(s) as bigint;
const rule = { maxAgeMs: 60_000, maxSpreadBps: 100, minSources: 2 };
const now = 1_000_000;
const answer = (source: string, rate: string, ageMs = 0): Answer => ({ source, rate: r(rate), at: now - ageMs });

t.test("rates parse exactly from the exchanges' decimal strings, and nothing else", async (t) => {
  t.equal(formatRate(r("50000.0")), "50000");
  t.equal(formatRate(r("0.000012345678901234567")), "0.000012345678901234", "beyond 18 places is cut, not rounded");
  for (const bad of ["", "-1", "1e5", "0", "0.000", "abc", " 1", "1.", 5, null]) t.equal(parseRate(bad), undefined, JSON.stringify(bad));
});

t.test("median: the middle, or the mean of the two middles", async (t) => {
  t.equal(median([r("3"), r("1"), r("2")]), r("2"));
  t.equal(median([r("1"), r("2")]), r("1.5"));
  t.throws(() => median([]));
});

t.test("quote: the median of fresh answers that agree", async (t) => {
  const q = quoteFrom([answer("kraken", "50000"), answer("coinbase", "50010"), answer("bitstamp", "49990")], now, rule);
  t.same(q, { ok: true, rate: r("50000"), sources: ["bitstamp", "coinbase", "kraken"], outliers: [] });

  const outlier = quoteFrom([answer("kraken", "50000"), answer("coinbase", "60000"), answer("bitstamp", "49990")], now, rule);
  t.same(outlier, { ok: true, rate: r("49995"), sources: ["bitstamp", "kraken"], outliers: ["coinbase"] }, "60,000 strays 20 % from 50,000: dropped");

  const stale = quoteFrom([answer("kraken", "50000"), answer("coinbase", "50010", 60_001), answer("bitstamp", "49990")], now, rule);
  t.same(stale.ok && stale.sources, ["bitstamp", "kraken"], "an answer older than the maximum age is left out");

  t.equal(quoteFrom([answer("kraken", "50000"), answer("coinbase", "50010", 70_000)], now, rule).ok, false, "one fresh answer is not enough");
  t.equal(quoteFrom([], now, rule).ok, false);
  t.equal(quoteFrom([answer("kraken", "50000"), answer("coinbase", "70000")], now, rule).ok, false, "two that disagree: no quote, not a guess");
  t.equal(quoteFrom([answer("fixed", "50000")], now, { ...rule, minSources: 1 }).ok, true, "one source when one is enough");
});

t.test("amounts are rounded up in the asset's smallest unit", async (t) => {
  t.equal(amountForPrice("100.00", 2, r("50000"), 8), "0.002");
  t.equal(amountForPrice("100.00", 2, r("49995"), 8), "0.00200021", "0.0020002000200… rounds up");
  t.equal(amountForPrice("0.01", 2, r("50000"), 8), "0.0000002");
  t.equal(amountForPrice("1", 0, r("3"), 6), "0.333334");
  t.equal(amountForPrice("10.00", 2, r("2000"), 18), "0.005");
  t.equal(amountForPrice("12.50", 2, r("1"), 6), "12.5");
  t.equal(amountForPrice("10.00", 2, invertRate(r("1.25")), 6), "12.5", "EUR priced stablecoins at the inverse of EUR-USD");
});

t.test("a spread lowers the rate (the shopper pays more), and values round down", async (t) => {
  t.equal(formatRate(applySpread(r("50000"), 100)), "49500");
  t.equal(formatRate(applySpread(r("50000"), 0)), "50000");
  t.equal(valueAtRate("0.0015", 8, r("50000"), 2), "75");
  t.equal(valueAtRate("0.00000001", 8, r("50000"), 2), "0", "0.0005 USD rounds down to 0.00");
  t.equal(valueAtRate("0.333334", 6, r("3"), 2), "1", "1.000002 rounds down to 1.00");
});
