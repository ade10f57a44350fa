/**
 * The currencies an intent may be priced in, with ISO 4217's minor units (the decimal places a
 * price may have). Only those the rate sources quote against every accepted asset.
 */
export const currencies = [
  { code: "USD", decimals: 2 },
  { code: "EUR", decimals: 2 },
] as const satisfies readonly { code: string; decimals: number }[];

export type CurrencyCode = (typeof currencies)[number]["code"];

export const currencyCodes: readonly CurrencyCode[] = currencies.map((c) => c.code);

export function findCurrency(code: string): { code: CurrencyCode; decimals: number } | undefined {
  return currencies.find((c) => c.code === code);
}
