/**
 * Status pills: the status's word on a tinted background. The word is always there (colour alone
 * tells nothing to someone who cannot tell the tints apart, or reads the page aloud); the tint
 * lets a list be scanned. Each tone's text keeps a contrast of at least 4.5:1 on its background
 * (dashboard.css, .pill-*).
 */
import { escapeHtml as e } from "../checkout/page.ts";

type Tone = "ok" | "warn" | "bad" | "info" | "neutral";

/**
 * The tone of each word, whichever kind of status it is (intent, delivery, attempt outcome,
 * endpoint): the words do not collide in meaning across kinds. Green: done and good; amber: done
 * but needs a look, or will be tried again; red: failed for good or switched off; blue: under way;
 * grey: ended without money or action.
 */
const tones: Readonly<Record<string, Tone>> = {
  confirmed: "ok",
  delivered: "ok",
  success: "ok",
  enabled: "ok",
  underpaid: "warn",
  overpaid: "warn",
  late: "warn",
  retryable: "warn",
  failed: "bad",
  terminal: "bad",
  disabled: "bad",
  pending: "info",
  processing: "info",
  cancelled: "neutral",
  expired: "neutral",
  // Refunds (services/refunds).
  awaiting_address: "info",
  awaiting_payment: "info",
  sent: "info",
  completed: "ok",
};

/** A status as a pill; `id` names it for a page's tests and links. Keeps the class `status status-<word>`. */
export function pill(status: string, o: { id?: string } = {}): string {
  const tone = tones[status] ?? "neutral";
  return `<span class="status status-${e(status)} pill pill-${tone}"${o.id ? ` id="${e(o.id)}"` : ""}>${e(status.replace(/_/g, " "))}</span>`;
}
