/** Enabled endpoints per merchant and environment: every event fans out to each of them. */
export const maxEnabledEndpoints = 16;
