/**
 * A shop's look: its logo URL and brand colour, checked the same way by the admin CLI, the API and
 * the dashboard (pure: no I/O), and the text colour drawn on the brand colour.
 *
 * The logo is never fetched by the server: the shopper's browser loads it with <img> (an SVG in
 * <img> runs no script and loads nothing else), sized by CSS, without a referrer, and the page's
 * Content-Security-Policy lets images come from the logo's origin only on the pages that show it.
 * So an SVG logo is accepted like any other image; what is refused is what could run or leak in
 * another way: any scheme but https, credentials in the URL, URLs over 2,048 characters.
 */

/** The longest logo URL accepted (what browsers and proxies handle everywhere). */
export const maxLogoUrlLength = 2048;
/** The longest display name (the merchants.name column). */
export const maxNameLength = 200;

/** What was wrong with a value, in words a merchant can act on; undefined when it is fine. */
export type LookProblem = string | undefined;

/** A display name: 1 to 200 characters once trimmed, no control characters. */
export function nameProblem(name: string): LookProblem {
  const trimmed = name.trim();
  // Counted in characters (code points), as the column's varchar(200) counts them.
  const length = [...trimmed].length;
  if (length === 0 || length > maxNameLength) return `The name must be 1 to ${maxNameLength} characters.`;
  if (/[\u0000-\u001f\u007f]/.test(trimmed)) return "The name must not contain control characters.";
  return undefined;
}

/** A logo URL: absolute https, no user or password, a host, at most 2,048 characters. */
export function logoUrlProblem(url: string): LookProblem {
  if (url.length > maxLogoUrlLength) return `The logo URL must be at most ${maxLogoUrlLength} characters.`;
  // Checked before parsing: the URL parser drops tabs and new lines, which would hide a scheme.
  if (!/^https:\/\/[^\s]+$/i.test(url)) return "The logo URL must be an https:// address (not http:, data: or javascript:) without spaces.";
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return "The logo URL is not a valid address.";
  }
  if (parsed.protocol !== "https:" || parsed.hostname === "") return "The logo URL must be an https:// address.";
  if (parsed.username !== "" || parsed.password !== "") return "The logo URL must not carry a user name or password.";
  return undefined;
}

/** The origin a page's CSP img-src names for a logo ("https://cdn.example"); undefined when the URL is not acceptable. */
export function logoOrigin(url: string | null | undefined): string | undefined {
  if (!url || logoUrlProblem(url) !== undefined) return undefined;
  return new URL(url).origin;
}

/** A brand colour: `#rrggbb`, six hex digits (stored lower-case). */
export function brandColorProblem(color: string): LookProblem {
  return /^#[0-9a-fA-F]{6}$/.test(color) ? undefined : "The brand colour must be #rrggbb (six hex digits, e.g. #1a7f37).";
}

/** WCAG 2 relative luminance of a `#rrggbb` colour. */
export function luminance(color: string): number {
  const channel = (i: number) => {
    const c = parseInt(color.slice(i, i + 2), 16) / 255;
    return c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  };
  return 0.2126 * channel(1) + 0.7152 * channel(3) + 0.0722 * channel(5);
}

/** WCAG 2 contrast ratio of two `#rrggbb` colours (1 to 21). */
export function contrastRatio(a: string, b: string): number {
  const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x) as [number, number];
  return (hi + 0.05) / (lo + 0.05);
}

/**
 * The text colour drawn on a brand colour: white or black, whichever contrasts more. Every colour
 * is accepted, because one of the two always reaches at least 4.58:1 (the worst case is a colour
 * of luminance 0.179), above WCAG AA's 4.5:1 for normal text: no colour need be refused.
 */
export function textColorOn(color: string): "#ffffff" | "#000000" {
  return contrastRatio(color, "#ffffff") >= contrastRatio(color, "#000000") ? "#ffffff" : "#000000";
}

/** A shop's look as pages draw it: a logo to show, and the brand colour with its text colour. */
export interface ShopLook {
  name: string;
  logoUrl?: string;
  brandColor?: string;
}
