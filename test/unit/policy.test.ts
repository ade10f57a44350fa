// The pure parts of a merchant's policy: which rule applies to an intent, what a rule may say,
// what a tolerance confirms, and which endpoints an event type reaches.
import t from "tap";
import fc from "fast-check";
import { statusByFunds } from "../../services/intents/funds.ts";
import { anyAsset, checkRule, checkTolerance, confirmationsFor, type ConfirmationRule } from "../../services/policy/policy.ts";
import { findAsset, type AssetInfo } from "../../services/vocabulary/assets.ts";
import { receives } from "../../services/vocabulary/event-types.ts";
import { describeError } from "../../services/platform/errors.ts";

const usdc = findAsset("ethereum", "USDC") as AssetInfo;
const eth = findAsset("ethereum", "ETH") as AssetInfo;
const rule = (asset: string, confirmations: number, belowAmount: string | null = null, belowConfirmations: number | null = null): ConfirmationRule => ({ asset, confirmations, belowAmount, belowConfirmations });

t.test("the asset's rule before the network's, the lower count strictly below the amount, else the network's setting", async (t) => {
  const rules = [rule(anyAsset, 6), rule("USDC", 12, "50", 1)];
  t.equal(confirmationsFor(rules, usdc, "3", 99), 1);
  t.equal(confirmationsFor(rules, usdc, "49.999999", 99), 1);
  t.equal(confirmationsFor(rules, usdc, "50", 99), 12, "at the amount: the full count");
  t.equal(confirmationsFor(rules, usdc, "50.000001", 99), 12);
  t.equal(confirmationsFor(rules, eth, "0.01", 99), 6, "another asset: the network's rule");
  t.equal(confirmationsFor([rule("USDC", 3)], eth, "1", 99), 99, "no rule for it: the fallback");
  t.equal(confirmationsFor([], usdc, "1", 7), 7);
});

t.test("what a rule may say", async (t) => {
  t.same(checkRule({ network: "ethereum", asset: "USDC", confirmations: 12, belowAmount: "50", belowConfirmations: 1 }), rule("USDC", 12, "50", 1));
  t.same(checkRule({ network: "bitcoin", asset: anyAsset, confirmations: 3 }), rule(anyAsset, 3));
  t.same(checkRule({ network: "bitcoin", asset: anyAsset, confirmations: 0, allowUnconfirmed: true }), rule(anyAsset, 0));
  const refused: [Parameters<typeof checkRule>[0], string][] = [
    [{ network: "dogecoin", asset: anyAsset, confirmations: 1 }, "network"],
    [{ network: "ethereum", asset: "BTC", confirmations: 1 }, "asset"],
    [{ network: "ethereum", asset: anyAsset, confirmations: 0 }, "confirmations"],
    [{ network: "ethereum", asset: anyAsset, confirmations: 10_001 }, "confirmations"],
    [{ network: "ethereum", asset: anyAsset, confirmations: 1.5 }, "confirmations"],
    [{ network: "ethereum", asset: anyAsset, confirmations: 3, belowAmount: "1", belowConfirmations: 1 }, "below_amount"],
    [{ network: "ethereum", asset: "USDC", confirmations: 3, belowAmount: "1" }, "below_confirmations"],
    [{ network: "ethereum", asset: "USDC", confirmations: 3, belowConfirmations: 1 }, "below_amount"],
    [{ network: "ethereum", asset: "USDC", confirmations: 3, belowAmount: "1.0000001", belowConfirmations: 1 }, "below_amount"],
    [{ network: "ethereum", asset: "USDC", confirmations: 3, belowAmount: "0", belowConfirmations: 1 }, "below_amount"],
    [{ network: "ethereum", asset: "USDC", confirmations: 3, belowAmount: "1", belowConfirmations: 4 }, "below_confirmations"],
    [{ network: "ethereum", asset: "USDC", confirmations: 3, belowAmount: "1", belowConfirmations: 0 }, "below_confirmations"],
  ];
  for (const [input, param] of refused) {
    let refusal: ReturnType<typeof describeError> | undefined;
    try {
      checkRule(input);
    } catch (err) {
      refusal = describeError(err);
    }
    t.same([refusal?.status, refusal?.param], [400, param], `${JSON.stringify(input)}: 400 naming ${param}`);
  }
  for (const bps of [-1, 1001, 0.5]) t.throws(() => checkTolerance(bps), `tolerance ${bps}`);
  t.equal(checkTolerance(1000), 1000);
});

t.test("a tolerance confirms funds short by at most that much, rounded down to the unit; never more than requested", async (t) => {
  t.equal(statusByFunds(100_000_000n, 99_900_000n, 50), "confirmed", "100 USDC, 0.1 % short, 0.5 % tolerance");
  t.equal(statusByFunds(100_000_000n, 99_500_000n, 50), "confirmed", "exactly at it");
  t.equal(statusByFunds(100_000_000n, 99_499_999n, 50), "underpaid", "a unit beyond it");
  t.equal(statusByFunds(100_000_000n, 99_900_000n, 0), "underpaid", "no tolerance");
  t.equal(statusByFunds(199n, 198n, 50), "underpaid", "0.995 of a unit rounds down to none");
  t.equal(statusByFunds(100n, 101n, 1000), "overpaid");
  t.equal(statusByFunds(100n, 0n, 1000), "pending");
  fc.assert(
    fc.property(fc.bigInt({ min: 1n, max: 10n ** 30n }), fc.bigInt({ min: 0n, max: 10n ** 30n }), fc.integer({ min: 0, max: 1000 }), (requested, counted, bps) => {
      const status = statusByFunds(requested, counted, bps);
      const short = requested - counted;
      if (counted === 0n) return status === "pending";
      if (short < 0n) return status === "overpaid";
      // Confirmed exactly when short × 10 000 ≤ requested × bps, to the unit (floor of the allowance).
      return (status === "confirmed") === (short <= (requested * BigInt(bps)) / 10_000n) && status !== "overpaid" && status !== "pending";
    }),
    { seed: 27, numRuns: 5000 },
  );
});

t.test("which types an endpoint receives", async (t) => {
  t.ok(receives(["*"], "payment.late"));
  t.ok(receives(["payment.confirmed"], "payment.confirmed"));
  t.notOk(receives(["payment.confirmed"], "payment.intent.created"));
  t.notOk(receives([], "payment.confirmed"));
});
