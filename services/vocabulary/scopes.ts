/**
 * Every scope an API key (or a dashboard link) can hold: the spec's, and ours (webhooks:listen,
 * api_keys:*). services/auth/keys.ts checks them; a request field whose one_of is "scope" takes
 * one of them (value-sets.ts). The disable route uses webhooks:write (DESIGN.md).
 */
export const scopes = [
  "payment_intents:read",
  "payment_intents:write",
  "webhooks:read",
  "webhooks:write",
  "merchant:readiness",
  // Streams Live events to a developer's machine (`listen`); Test keys stream with webhooks:read.
  "webhooks:listen",
  // The merchant's API keys of the caller's environment: list them (hints, scopes, last use),
  // and create and revoke them (a key is created with scopes its creator holds, never more).
  "api_keys:read",
  "api_keys:write",
  // The merchant's name and look (logo, brand colour) on its dashboard, checkout and terminal pages:
  // change them (any key reads them).
  "merchant:write",
] as const;
export type Scope = (typeof scopes)[number];
