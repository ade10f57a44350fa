/**
 * Idempotency-Key rules from the spec: trimmed, then 8 to 128 of A-Z a-z 0-9 . _ : -, as the
 * header's pattern in gen/openapi.json (scripts/protoc-gen-openapi.ts reads it from here).
 */
const keyChars = "[A-Za-z0-9._:-]{8,128}";
export const idempotencyKeyPattern = `^\\s*${keyChars}\\s*$`;
const keyPattern = new RegExp(`^${keyChars}$`);

export type KeyCheck = { ok: true; key: string } | { ok: false; reason: "missing" | "invalid" };

export function checkIdempotencyKey(header: string | null): KeyCheck {
  if (header === null) return { ok: false, reason: "missing" };
  const key = header.trim();
  if (key === "") return { ok: false, reason: "missing" };
  return keyPattern.test(key) ? { ok: true, key } : { ok: false, reason: "invalid" };
}
