import { createHmac, timingSafeEqual } from "node:crypto";
import { apiError } from "./errors.ts";

/**
 * Opaque, tamper-proof keyset cursors: the position and the binding it belongs
 * to (merchant, environment, filters), signed with a server key. A cursor
 * from another merchant, environment or filter set is refused.
 */
export interface CursorPosition {
  /** created_at in epoch milliseconds */
  t: number;
  /** id, the tie-breaker */
  i: string;
}

/** A row's place in a list ordered newest first on (created_at, id). */
export interface Keyset {
  createdAt: Date;
  id: string;
}

export class CursorCodec {
  private readonly key: Buffer;

  constructor(key: Buffer) {
    this.key = key;
  }

  encode(binding: string, position: CursorPosition): string {
    const payload = Buffer.from(JSON.stringify(position)).toString("base64url");
    return `${payload}.${this.sign(binding, payload)}`;
  }

  /** The position, or undefined when the cursor is malformed, tampered with or foreign. */
  decode(binding: string, cursor: string): CursorPosition | undefined {
    const [payload, signature, extra] = cursor.split(".");
    if (!payload || !signature || extra !== undefined) return undefined;
    const expected = Buffer.from(this.sign(binding, payload));
    const given = Buffer.from(signature);
    if (expected.length !== given.length || !timingSafeEqual(expected, given)) return undefined;
    try {
      const value: unknown = JSON.parse(Buffer.from(payload, "base64url").toString());
      if (typeof value !== "object" || value === null) return undefined;
      const { t, i } = value as Record<string, unknown>;
      if (typeof t !== "number" || !Number.isSafeInteger(t) || typeof i !== "string") return undefined;
      return { t, i };
    } catch {
      return undefined;
    }
  }

  /** Where a page starts: after the cursor's row, or at the top; an unusable cursor is 400 invalid_cursor. */
  start(binding: string, cursor: string | undefined): Keyset | undefined {
    if (cursor === undefined) return undefined;
    const position = this.decode(binding, cursor);
    if (!position) throw apiError("invalid_cursor", "The cursor is not valid for this list.", "cursor");
    return { createdAt: new Date(position.t), id: position.i };
  }

  /** A page from up to `limit + 1` rows read newest first: the rows to show and the next page's cursor. */
  page<R>(binding: string, rows: readonly R[], limit: number, keyOf: (row: R) => Keyset): { rows: R[]; hasMore: boolean; nextCursor: string | undefined } {
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    const hasMore = rows.length > limit;
    const key = hasMore && last !== undefined ? keyOf(last) : undefined;
    return { rows: page, hasMore, nextCursor: key ? this.encode(binding, { t: key.createdAt.getTime(), i: key.id }) : undefined };
  }

  private sign(binding: string, payload: string): string {
    return createHmac("sha256", this.key).update(binding).update("\0").update(payload).digest("base64url");
  }
}
