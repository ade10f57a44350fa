/**
 * Amounts are decimal strings end to end: parsed by pattern, compared as
 * scaled BigInts, stored as NUMERIC. Never a float.
 */
const decimalPattern = /^(0|[1-9][0-9]*)(\.[0-9]+)?$/;

export type AmountCheck = { ok: true; value: string } | { ok: false; reason: string; problem: "format" | "decimals" | "zero" | "length" | "range" };

/** The longest amount string looked at; anything longer is refused before it is parsed. */
export const maxAmountLength = 60;

export function checkAmount(raw: string, decimals: number): AmountCheck {
  // First, before any parsing: an amount can arrive as a megabyte of digits.
  if (raw.length > maxAmountLength) return { ok: false, problem: "length", reason: "is too long" };
  if (!decimalPattern.test(raw)) {
    return { ok: false, problem: "format", reason: 'must be a plain decimal string such as "12.50" (no sign, exponent or leading zeros)' };
  }
  const fraction = raw.split(".")[1] ?? "";
  if (fraction.length > decimals) {
    return { ok: false, problem: "decimals", reason: `has more than ${decimals} decimal places, the most this asset allows` };
  }
  // A decimal of the pattern above is zero exactly when it has no non-zero digit.
  if (!/[1-9]/.test(raw)) return { ok: false, problem: "zero", reason: "must be greater than zero" };
  return { ok: true, value: raw };
}

/**
 * The most digits before the point an amount asked for may have: below 10^15 of any asset, more
 * than the whole supply of every asset we accept (USDT, the largest, is about 10^11). An amount
 * observed on a chain is what it is and is not bounded.
 */
export const maxRequestedWholeDigits = 15;

/** checkAmount, and the bound on what a merchant may ask for. */
export function checkRequestedAmount(raw: string, decimals: number): AmountCheck {
  const checked = checkAmount(raw, decimals);
  if (checked.ok && (raw.split(".")[0] ?? "").length > maxRequestedWholeDigits) {
    return { ok: false, problem: "range", reason: `must be less than 1${"0".repeat(maxRequestedWholeDigits)}` };
  }
  return checked;
}

/** An amount in the form an asset takes, to show in error messages: "12.50", or "12.5" / "12" for coarser assets. */
export function exampleAmount(decimals: number): string {
  return decimals <= 0 ? "12" : decimals === 1 ? "12.5" : "12.50";
}

/** The amount in the asset's smallest unit. Assumes a string that passed checkAmount's pattern. */
export function toUnits(raw: string, decimals: number): bigint {
  const [whole = "0", fraction = ""] = raw.split(".");
  return BigInt(whole + fraction.padEnd(decimals, "0").slice(0, decimals));
}

/** Units back to a plain decimal string, without trailing fractional zeros ("12.5", "3", "0.000001"). */
export function fromUnits(units: bigint, decimals: number): string {
  if (units < 0n) throw new RangeError("amounts are never negative");
  const digits = units.toString().padStart(decimals + 1, "0");
  const whole = digits.slice(0, digits.length - decimals);
  const fraction = digits.slice(digits.length - decimals).replace(/0+$/, "");
  return fraction ? `${whole}.${fraction}` : whole;
}
