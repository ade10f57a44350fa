/**
 * A shop's look on its pages without loosening their Content-Security-Policy for styles: the brand
 * colour comes in a stylesheet of its own, served from the page's own assets path and made from the
 * six hex digits in its name (nothing else is read), so style-src stays 'self'. The logo's origin
 * is added to img-src of the page that shows it, and to no other directive or page.
 */
import { createHash } from "node:crypto";
import { textColorOn } from "../vocabulary/shop-look.ts";

/** The asset name of a colour's stylesheet ("brand-1a7f37.css"); what it serves is a pure function of it. */
export const brandStylesheetPattern = /^brand-([0-9a-f]{6})\.css$/;

export function brandStylesheetName(color: string): string {
  return `brand-${color.slice(1).toLowerCase()}.css`;
}

/**
 * The stylesheet of `#rrggbb`: the card's top edge and the main button in the brand colour, their
 * text white or black, whichever contrasts more (at least 4.58:1, WCAG AA for any colour). Hover
 * keeps the colours and underlines instead (a darker shade could lose the contrast).
 */
export function brandStylesheet(hex: string): Buffer {
  const color = `#${hex.toLowerCase()}`;
  const text = textColorOn(color);
  return Buffer.from(`/* The shop's brand colour ${color}; text ${text} on it. */
.card { border-top: 6px solid ${color}; }
.button:not(.button-secondary), .button:not(.button-secondary):hover { border-color: ${color}; background: ${color}; color: ${text}; }
.button:not(.button-secondary):hover { text-decoration: underline; }
`);
}

/** The asset's ETag version: its content's hash (it never changes for a name). */
export function brandStylesheetVersion(hex: string): string {
  return createHash("sha256").update(brandStylesheet(hex)).digest("base64url").slice(0, 16);
}

/** A page's CSP with `origin` also allowed for images (img-src only), or the policy unchanged without one. */
export function withImageOrigin(policy: string, origin: string | undefined): string {
  if (!origin) return policy;
  return policy.replace(/(^|; )img-src ([^;]*)/, (_m, lead: string, sources: string) => `${lead}img-src ${sources} ${origin}`);
}
