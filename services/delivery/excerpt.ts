import { StringDecoder } from "node:string_decoder";

// C0 controls other than tab, line feed and carriage return, DEL and the C1 controls. NUL among
// them is the one PostgreSQL refuses in text (22P05); the others make a stored excerpt unsafe
// to show in a terminal or a log.
const controls = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F-\u009F]/g;

/**
 * Text a receiver chose, made safe to store and show: at most `maxBytes` of it decoded as UTF-8
 * (invalid sequences become U+FFFD, a character cut at the end is dropped), control characters
 * replaced by U+FFFD.
 */
export function storableExcerpt(body: Buffer, maxBytes: number): string {
  return new StringDecoder("utf8").write(body.subarray(0, maxBytes)).replace(controls, "\uFFFD");
}

/** Any text of outside origin (an error's detail) for a column of at most `maxChars` characters. */
export function storableText(text: string, maxChars: number): string {
  const clean = text.replace(controls, "\uFFFD");
  if (clean.length <= maxChars) return clean;
  // Never half a surrogate pair.
  const cut = /[\uD800-\uDBFF]/.test(clean[maxChars - 2]!) ? maxChars - 2 : maxChars - 1;
  return `${clean.slice(0, cut)}…`;
}
