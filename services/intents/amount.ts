/**
 * Amounts are decimal strings end to end: parsed by pattern, compared as
 * scaled BigInts, stored as NUMERIC. Never a float.
 */
const decimalPattern = /^(0|[1-9][0-9]*)(\.[0-9]+)?$/;

export type AmountCheck = { ok: true; value: string } | { ok: false; reason: string };

export function checkAmount(raw: string, decimals: number): AmountCheck {
  if (!decimalPattern.test(raw)) {
    return { ok: false, reason: 'must be a plain decimal string such as "12.50" (no sign, exponent or leading zeros)' };
  }
  const fraction = raw.split(".")[1] ?? "";
  if (fraction.length > decimals) {
    return { ok: false, reason: `has more than ${decimals} decimal places, the most this asset allows` };
  }
  if (toUnits(raw, decimals) === 0n) return { ok: false, reason: "must be greater than zero" };
  if (raw.length > 60) return { ok: false, reason: "is too long" };
  return { ok: true, value: raw };
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
