import t from "tap";
import { checkAmount, checkRequestedAmount, toUnits } from "../../services/vocabulary/amount.ts";

t.test("checkAmount accepts plain positive decimal strings", async (t) => {
  for (const [raw, decimals] of [
    ["12.50", 6],
    ["0.000001", 6],
    ["1", 6],
    ["1", 0],
    ["100", 2],
    ["0.5", 1],
    ["123456789.123456", 6],
  ] as const) {
    t.same(checkAmount(raw, decimals), { ok: true, value: raw }, `${JSON.stringify(raw)} with ${decimals} decimals`);
  }
});

t.test("checkAmount refuses malformed strings", async (t) => {
  for (const raw of ["1e3", "-1", "+1", "01.5", "00", "1.", ".5", " 1", "1 ", "1,5", "", "abc", "0x10", "1.2.3", "Infinity", "NaN", "١"]) {
    const result = checkAmount(raw, 6);
    t.equal(result.ok, false, `${JSON.stringify(raw)} is refused`);
    if (!result.ok) t.match(result.reason, /plain decimal/, `${JSON.stringify(raw)} reason names the format`);
  }
});

t.test("checkAmount refuses zero", async (t) => {
  for (const raw of ["0", "0.0", "0.000000"]) {
    const result = checkAmount(raw, 6);
    t.equal(result.ok, false, `${raw} is refused`);
    if (!result.ok) t.match(result.reason, /greater than zero/, `${raw} reason`);
  }
});

t.test("checkAmount refuses more decimals than the asset allows", async (t) => {
  const tooFine = checkAmount("0.0000001", 6);
  t.equal(tooFine.ok, false, "7 decimals on a 6-decimal asset");
  if (!tooFine.ok) t.match(tooFine.reason, /more than 6 decimal places/);

  const cents = checkAmount("1.234", 2);
  t.equal(cents.ok, false, "3 decimals on a 2-decimal asset");
  if (!cents.ok) t.match(cents.reason, /more than 2 decimal places/);

  t.equal(checkAmount("1.5", 0).ok, false, "any fraction on a 0-decimal asset");
  t.equal(checkAmount("1.23", 2).ok, true, "exactly the allowed decimals");
  // Trailing zeros still count as decimal places.
  t.equal(checkAmount("1.500", 2).ok, false, "trailing zeros beyond the asset's decimals");
});

t.test("checkAmount refuses absurdly long amounts", async (t) => {
  t.equal(checkAmount("9".repeat(61), 6).ok, false, "61 digits");
  t.equal(checkAmount("9".repeat(60), 6).ok, true, "60 digits");
});

t.test("length is checked before the form, the decimals or the value: a megabyte of digits is refused as too long", async (t) => {
  const mib = 1 << 20;
  t.match(checkAmount("1".repeat(mib) + ".0000001", 6), { ok: false, problem: "length" }, "not parsed for its decimals");
  t.match(checkAmount("0".repeat(mib), 6), { ok: false, problem: "length" }, "not matched against the form");
  t.match(checkAmount("1".repeat(mib), 6), { ok: false, problem: "length" }, "not converted to a number");
  t.match(checkAmount("0.000", 6), { ok: false, problem: "zero" });
  t.match(checkAmount("0.001", 6), { ok: true, value: "0.001" });
});

t.test("toUnits scales to the asset's smallest unit", async (t) => {
  t.equal(toUnits("1.5", 6), 1_500_000n);
  t.equal(toUnits("1", 6), 1_000_000n);
  t.equal(toUnits("0.000001", 6), 1n);
  t.equal(toUnits("12.50", 2), 1250n);
  t.equal(toUnits("7", 0), 7n);
  t.equal(toUnits("0", 18), 0n);
  t.equal(
    toUnits("123456789012345678901234567890.123456789012345678", 18),
    123456789012345678901234567890123456789012345678n,
    "no float precision loss",
  );
});

t.test("a requested amount is less than 10^15 of the asset; an observed one is not bounded", async (t) => {
  t.same(checkRequestedAmount("999999999999999.99", 2), { ok: true, value: "999999999999999.99" }, "15 digits before the point");
  const big = checkRequestedAmount("1000000000000000", 6);
  t.same(big, { ok: false, problem: "range", reason: "must be less than 1000000000000000" });
  t.match(checkRequestedAmount("99999999999999999999999999999999999999.00", 6), { ok: false, problem: "range" }, "the issue's 38 nines");
  t.match(checkRequestedAmount("12.5000001", 6), { ok: false, problem: "decimals" }, "the other rules first");
  t.same(checkAmount("1000000000000000", 6), { ok: true, value: "1000000000000000" }, "chain facts are what they are");
});
