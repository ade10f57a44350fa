/**
 * Enabled endpoints per merchant and environment, enforced when one is created (under a
 * lock on the merchant's row, so concurrent creates cannot pass it). Events never depend
 * on it: one with more enabled endpoints (rows written directly, or a limit lowered since)
 * is still delivered to each of them.
 */
export const maxEnabledEndpoints = 16;
