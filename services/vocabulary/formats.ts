/**
 * Patterns of request fields, written once for the RPC server's checks and the OpenAPI
 * document (ECMAScript regular expressions, which JSON Schema's `pattern` also is).
 */
import { maxRequestedWholeDigits } from "./amount.ts";

/**
 * An absolute https URL on the default port with no user name or password: the syntax the URL
 * policy takes (services/delivery/url-policy.ts), in the form a client can check before sending.
 * Where it points (public addresses only) is the URL policy's to check when it is used.
 */
export const httpsUrlPattern = "^https://(\\[[0-9A-Fa-f:.]+\\]|[^\\s/?#@:\\[\\]\\\\]+)(:443)?([/?#][^\\s\\\\]*)?$";

/**
 * A timestamp as a request takes it: RFC 3339 in the proto JSON form, with an upper-case "T" and
 * "Z" or an offset, fractions to nanoseconds (RFC 3339 also allows "t", "z" and a space; proto
 * JSON does not). Whether the date is a real one is checked beside it (services/platform/api-json.ts).
 */
export const timestampPattern = "^([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\\.[0-9]{1,9})?(?:Z|[+-]([0-9]{2}):([0-9]{2}))$";

/** What is wrong with a parsed URL's scheme, user name or port for a webhook, if anything (the URL policy's words). */
export function webhookUrlFault(url: URL): string | undefined {
  if (url.protocol !== "https:") {
    const scheme = url.protocol.slice(0, -1);
    return `the URL must use https, not ${scheme.length <= 20 ? scheme : "another scheme"}`;
  }
  if (url.username !== "" || url.password !== "") return "the URL must not contain a user name or password";
  // `URL` drops the default port, so an explicit :443 reads as "".
  if (url.port !== "") return `port ${url.port} is not allowed; webhooks are sent to port 443 only`;
  return undefined;
}

/** Why a URL does not match httpsUrlPattern. */
export function httpsUrlFault(raw: string): string {
  const url = URL.parse(raw);
  if (!url) return "the URL is not a valid absolute URL";
  // Not only webhook URLs take this form (an intent's redirect_url does too): the port's words are its own.
  if (url.protocol === "https:" && url.port !== "") return `port ${url.port} is not allowed; only the default port 443 is`;
  return webhookUrlFault(url) ?? 'the URL must be written as https://host/path, such as "https://shop.example/hooks", with no spaces or backslashes';
}

/**
 * The decimal strings services/vocabulary/amount.ts takes: digits with no sign, exponent or
 * leading zeros, with a non-zero digit; requested amounts have at most 15 digits before the point;
 * `decimals`, when known, bounds the places after it. The length (maxAmountLength) is separate.
 */
export function amountPattern(requested: boolean, decimals?: number): string {
  const whole = requested ? `(0|[1-9][0-9]{0,${maxRequestedWholeDigits - 1}})` : "(0|[1-9][0-9]*)";
  const fraction = decimals === undefined ? "(\\.[0-9]+)?" : decimals === 0 ? "" : `(\\.[0-9]{1,${decimals}})?`;
  return `^(?=[0-9.]*[1-9])${whole}${fraction}$`;
}
