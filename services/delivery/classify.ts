/**
 * The spec's classification of a delivery attempt:
 * 2xx success; transport error, timeout, 408, 425, 429, 5xx retryable;
 * any other 3xx or 4xx terminal (redirects are never followed); a security
 * rejection, or a signing secret that cannot be opened (secret_unreadable), terminal.
 */
export type Outcome = "success" | "retryable" | "terminal";

/** Why an attempt got no usable HTTP response. */
export const errorClasses = ["timeout", "dns", "connect", "tls", "transport", "security", "secret_unreadable"] as const;
export type ErrorClass = (typeof errorClasses)[number];

export type AttemptResult = { statusCode: number } | { error: ErrorClass };

const retryableStatuses = new Set([408, 425, 429]);

export function classify(result: AttemptResult): Outcome {
  // A secret no key of ours opens stays unopenable on every retry.
  if ("error" in result) return result.error === "security" || result.error === "secret_unreadable" ? "terminal" : "retryable";
  const code = result.statusCode;
  if (code >= 200 && code <= 299) return "success";
  if (code >= 500 || retryableStatuses.has(code)) return "retryable";
  // Any other 3xx or 4xx; 1xx never reaches here (Node consumes informational responses).
  return "terminal";
}
