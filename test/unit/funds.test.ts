// The pure settlement rules (services/intents/funds.ts): table cases, and a property that
// what impliedStatus asks for is always a move settle can make through the status machine.
import fc from "fast-check";
import t from "tap";
import { exceptionReason, impliedStatus, statusByFunds, uncountedReason, type Funds, type IntentTerms } from "../../services/intents/funds.ts";
import { canTransition, statuses, type Status } from "../../services/intents/status.ts";

const requested = 10_000_000n; // 10 USDC in units (6 decimals)
const funds = (counted: bigint, countedLate = 0n): Funds => ({ counted, countedLate });

t.test("statusByFunds: the boundaries", async (t) => {
  const cases: [bigint, Status][] = [
    [0n, "pending"],
    [1n, "underpaid"],
    [requested - 1n, "underpaid"],
    [requested, "confirmed"],
    [requested + 1n, "overpaid"],
    [requested * 100n, "overpaid"],
  ];
  for (const [counted, want] of cases) t.equal(statusByFunds(requested, counted), want, `${counted} of ${requested}`);
  t.equal(statusByFunds(1n, 1n), "confirmed", "the smallest request, paid exactly");
});

t.test("cancelled sticks, whatever the funds or the clock", async (t) => {
  for (const counted of [0n, 1n, requested, requested + 1n]) {
    for (const countedLate of [0n, counted]) {
      for (const expired of [false, true]) {
        t.equal(impliedStatus("cancelled", requested, funds(counted, countedLate), expired), "cancelled", `${counted}/${countedLate}/${expired}`);
      }
    }
  }
});

t.test("expired and late: decided by the late funds alone", async (t) => {
  const cases: [Status, Funds, Status][] = [
    ["expired", funds(0n), "expired"],
    ["expired", funds(requested), "expired"], // on-time funds counted before expiry do not make it late
    ["expired", funds(requested, 1n), "late"],
    ["expired", funds(1n, 1n), "late"], // late even when short
    ["late", funds(requested, requested), "late"],
    ["late", funds(requested, 0n), "expired"], // the late funds reorged away
    ["late", funds(0n), "expired"],
  ];
  for (const [from, f, want] of cases) {
    for (const expired of [false, true]) {
      t.equal(impliedStatus(from, requested, f, expired), want, `${from} ${f.counted}/${f.countedLate} expired=${expired}`);
    }
  }
});

t.test("payable statuses: by funds before expiry", async (t) => {
  for (const from of ["pending", "underpaid", "confirmed", "overpaid"] as const) {
    for (const counted of [0n, 1n, requested - 1n, requested, requested + 1n]) {
      t.equal(impliedStatus(from, requested, funds(counted), false), statusByFunds(requested, counted), `${from} with ${counted}`);
    }
  }
});

t.test("past expiry: unpaid is expired, paid stays by funds", async (t) => {
  const cases: [Status, bigint, Status][] = [
    ["pending", 0n, "expired"],
    ["pending", requested - 1n, "expired"],
    ["underpaid", 1n, "expired"],
    ["underpaid", requested - 1n, "expired"],
    ["confirmed", requested, "confirmed"],
    ["confirmed", requested + 1n, "overpaid"],
    ["overpaid", requested + 1n, "overpaid"],
    ["overpaid", requested, "confirmed"],
    // a reorg took a paid intent's funds after its expiry
    ["confirmed", requested - 1n, "expired"],
    ["confirmed", 0n, "expired"],
    ["overpaid", 1n, "expired"],
  ];
  for (const [from, counted, want] of cases) t.equal(impliedStatus(from, requested, funds(counted), true), want, `${from} with ${counted}, expired`);
});

t.test("property: impliedStatus is a move settle can make", async (t) => {
  const arbFunds = fc
    .tuple(fc.bigInt({ min: 0n, max: 10n ** 12n }), fc.bigInt({ min: 0n, max: 10n ** 12n }))
    .map(([a, b]): Funds => (a >= b ? { counted: a, countedLate: b } : { counted: b, countedLate: a }));
  const arbRequested = fc.oneof(fc.bigInt({ min: 1n, max: 10n ** 12n }), fc.constantFrom(1n, requested));
  fc.assert(
    fc.property(fc.constantFrom(...statuses), arbRequested, arbFunds, fc.boolean(), (from, req, f, expired) => {
      const to = impliedStatus(from, req, f, expired);
      if (to === from || canTransition(from, to)) return true;
      // settle's two-step move: back to what the funds say (payment.reorged), then expired.
      const byFunds = statusByFunds(req, f.counted);
      return to === "expired" && canTransition(from, byFunds) && canTransition(byFunds, "expired");
    }),
    { numRuns: 2000 },
  );
  t.pass("2000 runs");
});

t.test("property: the boundaries of statusByFunds", async (t) => {
  fc.assert(
    fc.property(fc.bigInt({ min: 1n, max: 10n ** 15n }), fc.bigInt({ min: 0n, max: 10n ** 15n }), (req, counted) => {
      const s = statusByFunds(req, counted);
      const want = counted === 0n ? "pending" : counted < req ? "underpaid" : counted === req ? "confirmed" : "overpaid";
      return s === want;
    }),
  );
  t.pass("statusByFunds orders by counted vs requested");
});

t.test("a payment after the intent stopped taking payments never counts, and is an exception", async (t) => {
  const at = (s: number) => new Date(Date.UTC(2026, 10, 28, 12, 0, s));
  const mined = (recorded: number, block: number, o: Partial<{ asset: string; orphaned: boolean; confirmations: number }> = {}) => ({ asset: "USDC", orphaned: false, confirmations: 3, recordedAt: at(recorded), observedAt: at(block), ...o });
  const lateWindowEnds: IntentTerms = { asset: "USDC", requiredConfirmations: 3, closes: { at: at(30), reason: "after_late_window" } };
  const cancelledAt: IntentTerms = { asset: "USDC", requiredConfirmations: 3, closes: { at: at(30), reason: "intent_cancelled" } };
  t.equal(uncountedReason(mined(20, 20), lateWindowEnds), undefined, "paid within the window: counts");
  t.equal(uncountedReason(mined(40, 40), lateWindowEnds), "after_late_window", "paid after it");
  t.equal(uncountedReason(mined(40, 25), lateWindowEnds), undefined, "mined within it, recorded after (a watcher that was down): its block's time decides");
  t.equal(uncountedReason(mined(25, 40), lateWindowEnds), undefined, "first seen within it (the mempool), mined after: counts");
  t.equal(uncountedReason(mined(40, 25), cancelledAt), "intent_cancelled", "recorded after a cancellation: never counts, whatever its block's time");
  t.equal(uncountedReason(mined(20, 20), cancelledAt), undefined, "recorded before it: counts as before");
  t.equal(uncountedReason(mined(40, 40, { asset: "USDT" }), cancelledAt), "wrong_asset", "another asset says so first");
  t.equal(uncountedReason(mined(40, 40, { orphaned: true }), lateWindowEnds), "orphaned", "an orphaned output is orphaned");
  t.equal(uncountedReason(mined(40, 40, { confirmations: 1 }), lateWindowEnds), "after_late_window", "not below_confirmations: it never will count");
  t.equal(exceptionReason(mined(40, 40), cancelledAt), "intent_cancelled");
  t.equal(exceptionReason(mined(40, 40, { asset: "USDT" }), lateWindowEnds), "wrong_asset");
  t.equal(exceptionReason(mined(20, 20), lateWindowEnds), undefined, "a payment that counts is no exception");
  t.equal(uncountedReason(mined(40, 40), { asset: "USDC", requiredConfirmations: 3 }), undefined, "terms with no close (the simulator's): counts");
});
