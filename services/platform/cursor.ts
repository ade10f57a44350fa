import { createHmac, timingSafeEqual } from "node:crypto";

/**
 * Opaque, tamper-proof keyset cursors: the position and the scope it belongs
 * to (merchant, environment, filters), signed with a server key. A cursor
 * from another merchant, environment or filter set is refused.
 */
export interface CursorPosition {
  /** created_at in epoch milliseconds */
  t: number;
  /** id, the tie-breaker */
  i: string;
}

export class CursorCodec {
  private readonly key: Buffer;

  constructor(key: Buffer) {
    this.key = key;
  }

  encode(scope: string, position: CursorPosition): string {
    const payload = Buffer.from(JSON.stringify(position)).toString("base64url");
    return `${payload}.${this.sign(scope, payload)}`;
  }

  /** The position, or undefined when the cursor is malformed, tampered with or foreign. */
  decode(scope: string, cursor: string): CursorPosition | undefined {
    const [payload, signature, extra] = cursor.split(".");
    if (!payload || !signature || extra !== undefined) return undefined;
    const expected = Buffer.from(this.sign(scope, payload));
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

  private sign(scope: string, payload: string): string {
    return createHmac("sha256", this.key).update(scope).update("\0").update(payload).digest("base64url");
  }
}
