import type { CursorCodec } from "../platform/cursor.ts";
import { apiError } from "../platform/errors.ts";

/**
 * Where a reader of ListWatchedAddresses is, in the order of the intents' creating transactions
 * (payment_intents.watch_xid, then id), not of any clock: a create that commits late is listed by
 * the next read after its commit, however long after its created_at that is.
 *
 * A read (one or more pages) starts at a floor F and lists the rows with watch_xid >= F. Its first
 * page also takes the xmin of the statement's own snapshot (pg_snapshot_xmin(pg_current_snapshot())):
 * every transaction below it had ended before that page was read, so its rows, if committed, are
 * visible to that page and to every later one, and the read lists them. Transactions at or above it
 * may commit later: the next read starts there. Rows can come again (callers keep a set).
 */
export interface WatchedPosition {
  /** The rows after this one in (watch_xid, id) order. At a read's start: its floor, with id "" (before every id). */
  after: { xid: string; id: string };
  /** Within a read of several pages: where the next read starts (the xmin of its first page's snapshot). */
  next?: string;
}

/** From the top: a full read (no transaction id is below 0). */
export const fromTop: WatchedPosition = { after: { xid: "0", id: "" } };

const maxXid8 = (1n << 64n) - 1n;

function isXid8(s: string): boolean {
  return /^(0|[1-9][0-9]{0,19})$/.test(s) && BigInt(s) <= maxXid8;
}

/** The cursor's binding. Cursors written before the order by commit were bound to `legacyBinding`. */
export function watchedBinding(chain: { network: string; environment: string }): string {
  return `watched-by-commit:${chain.network}:${chain.environment}`;
}

function legacyBinding(chain: { network: string; environment: string }): string {
  return `watched:${chain.network}:${chain.environment}`;
}

/** The position as the cursor's text (signed by the codec, bound to the chain). */
export function encodeWatchedCursor(cursors: CursorCodec, chain: { network: string; environment: string }, p: WatchedPosition): string {
  return cursors.encode(watchedBinding(chain), { t: 0, i: `${p.after.xid}.${p.next ?? ""}.${p.after.id}` });
}

/**
 * Where a read starts: the top without a cursor, or with a cursor written before the order by
 * commit (its creation-time position means nothing now, and starting over lists everything
 * again, which a reader keeping a set can take); any other unreadable cursor is 400 invalid_cursor.
 */
export function decodeWatchedCursor(cursors: CursorCodec, chain: { network: string; environment: string }, cursor: string | undefined): WatchedPosition {
  if (cursor === undefined) return fromTop;
  const position = cursors.decode(watchedBinding(chain), cursor);
  const parts = position && position.t === 0 ? /^([0-9]+)\.([0-9]*)\.(.*)$/s.exec(position.i) : null;
  if (parts) {
    const [, xid = "", next = "", id = ""] = parts;
    if (isXid8(xid) && (next === "" || isXid8(next))) return next === "" ? { after: { xid, id } } : { after: { xid, id }, next };
  }
  if (cursors.decode(legacyBinding(chain), cursor)) return fromTop;
  throw apiError("invalid_cursor", "The cursor is not valid for this list.", "cursor");
}

/**
 * The position after a page: the next page of the same read when there is more (keeping the read's
 * `next`), else the start of the next read, at the xmin of the read's first page.
 * `horizon` is the xmin of this page's snapshot; `last` the page's last row.
 */
export function positionAfter(from: WatchedPosition, horizon: string, last: { xid: string; id: string } | undefined, hasMore: boolean): WatchedPosition {
  const next = from.next ?? horizon;
  if (hasMore && last) return { after: last, next };
  return { after: { xid: next, id: "" } };
}
