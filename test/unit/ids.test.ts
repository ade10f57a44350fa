// Public ids: a prefix and 24 base62 characters, one at a time or several from one draw.
import t from "tap";
import { newId, newIds } from "../../services/platform/ids.ts";

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
