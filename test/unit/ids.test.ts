// Public ids: a prefix and 24 base62 characters, one at a time or several from one draw.
import t from "tap";
import fc from "fast-check";
import { idTime, newId, newIds, newTimedId, newTimedIds } from "../../services/platform/ids.ts";

const shape = /^wd_[0-9A-Za-z]{24}$/;
t.match(newId("wd"), shape);
const many = newIds("wd", 16);
t.equal(many.length, 16);
t.ok(many.every((id) => shape.test(id)), "each has the shape of newId's");
t.equal(new Set([...many, ...newIds("wd", 16)]).size, 32, "all distinct");
t.same(newIds("wd", 0), []);

// Ids are drawn from a pool of random bytes refilled as it runs out: across many refills no byte
// is handed out twice (a repeat would show as duplicate ids), and a draw larger than the pool works.
const drawn = Array.from({ length: 3000 }, () => newId("pi"));
t.equal(new Set(drawn).size, drawn.length, "3000 ids over many refills, all distinct");
const large = newIds("wd", 200);
t.equal(new Set(large).size, 200, "a draw larger than the pool");
t.ok(large.every((id) => shape.test(id)));
// Base62 characters stay uniform through the pool: each of the 62 appears, none far from its share.
const counts = new Map<string, number>();
for (const id of drawn) for (const c of id.slice(3)) counts.set(c, (counts.get(c) ?? 0) + 1);
const expected = (drawn.length * 24) / 62;
t.equal(counts.size, 62);
t.ok([...counts.values()].every((n) => Math.abs(n - expected) < expected * 0.15), "every character within 15 % of its expected count");

// Timed ids (rows of time-partitioned tables): the creation time to the millisecond, read back
// exactly; ids of the older shape, and anything else, carry none.
t.test("a timed id carries its creation time, and sorts by it", async (t) => {
  const at = new Date("2026-11-28T21:43:07.123Z");
  const id = newTimedId("evt", at);
  t.match(id, /^evt_[0-9A-Za-z]{26}$/);
  t.same(idTime(id), at);
  const ids = newTimedIds("wd", at, 5);
  t.equal(new Set(ids).size, 5, "distinct");
  t.ok(ids.every((i) => idTime(i)?.getTime() === at.getTime()), "each with the time");
  t.equal(idTime(newId("evt")), undefined, "an id of the older shape (24 characters) has no time");
  for (const other of ["evt_old1", "", "wd_", "wd_" + "!".repeat(26), "evt_" + "a".repeat(27)]) t.equal(idTime(other), undefined, JSON.stringify(other));
  fc.assert(
    fc.property(fc.integer({ min: 0, max: 4_102_444_800_000 }), fc.integer({ min: 0, max: 4_102_444_800_000 }), (a, b) => {
      const [x, y] = [newTimedId("wd", new Date(a)), newTimedId("wd", new Date(b))];
      if (idTime(x)?.getTime() !== a || idTime(y)?.getTime() !== b) return false;
      // The time part compares bytewise as the times do (the random part decides only within one millisecond).
      const [tx, ty] = [x.slice(3, 11), y.slice(3, 11)];
      return a === b ? tx === ty : a < b === tx < ty;
    }),
  );
});
