// The watched addresses' cursor (services/chains/watched-cursor.ts): its text round trip, the
// cursors it takes and refuses, and, against a model of PostgreSQL's transactions and snapshots,
// that a reader paging with it lists every committed intent however late its transaction commits.
import { randomBytes } from "node:crypto";
import { ConnectError } from "@connectrpc/connect";
import fc from "fast-check";
import t from "tap";
import { ErrorDetailSchema } from "../../gen/payments/v1/options_pb.ts";
import { decodeWatchedCursor, encodeWatchedCursor, fromTop, positionAfter, type WatchedPosition } from "../../services/chains/watched-cursor.ts";
import { CursorCodec } from "../../services/platform/cursor.ts";

const codec = new CursorCodec(randomBytes(32));
const chain = { network: "ethereum", environment: "test" };

function refusal(f: () => unknown): string | undefined {
  try {
    f();
    return undefined;
  } catch (e) {
    return ConnectError.from(e).findDetails(ErrorDetailSchema)[0]?.code;
  }
}

t.test("round trip", async (t) => {
  const positions: WatchedPosition[] = [
    fromTop,
    { after: { xid: "0", id: "" } },
    { after: { xid: "18446744073709551615", id: "" } },
    { after: { xid: "1234", id: "pi_4f0Xc9abcdefghijklmnopq" }, next: "1200" },
    { after: { xid: "7", id: "pi_a.b.c" }, next: "0" },
  ];
  for (const p of positions) t.same(decodeWatchedCursor(codec, chain, encodeWatchedCursor(codec, chain, p)), p, JSON.stringify(p));
  t.same(decodeWatchedCursor(codec, chain, undefined), fromTop, "no cursor: from the top");
});

t.test("a cursor from before the order by commit starts over; anything else unreadable is invalid_cursor", async (t) => {
  const legacy = codec.encode("watched:ethereum:test", { t: 1_790_000_000_123, i: "pi_x" });
  t.same(decodeWatchedCursor(codec, chain, legacy), fromTop, "an old cursor of this chain");
  t.equal(refusal(() => decodeWatchedCursor(codec, { network: "polygon", environment: "test" }, legacy)), "invalid_cursor", "an old cursor of another chain");
  const current = encodeWatchedCursor(codec, chain, { after: { xid: "5", id: "" } });
  t.equal(refusal(() => decodeWatchedCursor(codec, { network: "ethereum", environment: "live" }, current)), "invalid_cursor", "another environment's");
  t.equal(refusal(() => decodeWatchedCursor(new CursorCodec(randomBytes(32)), chain, current)), "invalid_cursor", "another key's");
  for (const garbage of ["", "x", "a.b", current + "x"]) t.equal(refusal(() => decodeWatchedCursor(codec, chain, garbage)), "invalid_cursor", JSON.stringify(garbage));
  const binding = "watched-by-commit:ethereum:test";
  for (const i of ["", "5", "5.", "x.5.", "5.x.", "-1..", "01..", "18446744073709551616..", "5.18446744073709551616."]) {
    t.equal(refusal(() => decodeWatchedCursor(codec, chain, codec.encode(binding, { t: 0, i }))), "invalid_cursor", `signed but malformed: ${JSON.stringify(i)}`);
  }
  t.equal(refusal(() => decodeWatchedCursor(codec, chain, codec.encode(binding, { t: 1, i: "5.." }))), "invalid_cursor", "another format");
});

t.test("positionAfter: pages of one read keep its first page's horizon; the next read starts there", async (t) => {
  const first = positionAfter(fromTop, "100", { xid: "120", id: "pi_b" }, true);
  t.same(first, { after: { xid: "120", id: "pi_b" }, next: "100" });
  const second = positionAfter(first, "130", { xid: "125", id: "pi_c" }, true);
  t.same(second, { after: { xid: "125", id: "pi_c" }, next: "100" }, "a later page's own horizon is not taken");
  t.same(positionAfter(second, "140", undefined, false), { after: { xid: "100", id: "" } }, "caught up: from the first page's horizon");
  t.same(positionAfter({ after: { xid: "100", id: "" } }, "150", { xid: "101", id: "pi_d" }, false), { after: { xid: "150", id: "" } }, "a read of one page: from its horizon");
});

/**
 * A model of the database: transactions take increasing ids, write intent rows and end; a
 * statement sees the rows of the transactions that committed before it, and its snapshot's xmin
 * is the lowest id still open (or the next id). A reader pages through with the cursor's logic,
 * one page per statement, while transactions begin, write and end in between.
 */
type Step = { kind: "begin" } | { kind: "write"; tx: number } | { kind: "end"; tx: number; commit: boolean } | { kind: "page" };

t.test("model: every committed row is listed, whenever its transaction commits", async () => {
  const step = fc.oneof(
    fc.constant<Step>({ kind: "begin" }),
    fc.nat(5).map<Step>((tx) => ({ kind: "write", tx })),
    fc.record({ tx: fc.nat(5), commit: fc.boolean() }).map<Step>(({ tx, commit }) => ({ kind: "end", tx, commit })),
    fc.constant<Step>({ kind: "page" }),
  );
  fc.assert(
    fc.property(fc.array(step, { maxLength: 60, size: "max" }), fc.integer({ min: 1, max: 4 }), (steps, limit) => {
      let nextXid = 3n;
      const txs: { xid: bigint; state: "open" | "committed" | "aborted"; rows: string[] }[] = [];
      let rowNo = 0;
      let position: WatchedPosition = fromTop;
      let reading = false;
      const listed = new Set<string>();
      const cmp = (a: { xid: bigint; id: string }, b: { xid: bigint; id: string }) => (a.xid < b.xid ? -1 : a.xid > b.xid ? 1 : a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
      const page = (): boolean => {
        const open = txs.filter((x) => x.state === "open").map((x) => x.xid);
        const horizon = open.length ? open.reduce((m, x) => (x < m ? x : m)) : nextXid;
        const after = { xid: BigInt(position.after.xid), id: position.after.id };
        const visible = txs.filter((x) => x.state === "committed").flatMap((x) => x.rows.map((id) => ({ xid: x.xid, id })));
        const rows = visible.filter((r) => cmp(r, after) > 0).sort(cmp).slice(0, limit + 1);
        const shown = rows.slice(0, limit);
        for (const r of shown) listed.add(r.id);
        const hasMore = rows.length > limit;
        const last = shown.at(-1);
        position = positionAfter(position, String(horizon), last && { xid: String(last.xid), id: last.id }, hasMore);
        return hasMore;
      };
      for (const s of steps) {
        if (s.kind === "begin") txs.push({ xid: nextXid++, state: "open", rows: [] });
        else if (s.kind === "page") reading = page();
        else {
          // The transaction s.tx places back from the newest: recent ones are the likelier to be open.
          const tx = txs[txs.length - 1 - s.tx];
          if (!tx || tx.state !== "open") continue;
          if (s.kind === "write") tx.rows.push(`pi_${String(rowNo++).padStart(4, "0")}`);
          else tx.state = s.commit ? "committed" : "aborted";
        }
      }
      for (const tx of txs) if (tx.state === "open") tx.state = "committed";
      // The read under way goes on to its end; then one more read.
      while (reading) reading = page();
      while (page());
      const committed = txs.filter((x) => x.state === "committed").flatMap((x) => x.rows);
      return committed.every((id) => listed.has(id));
    }),
    { numRuns: 2000 },
  );
});
