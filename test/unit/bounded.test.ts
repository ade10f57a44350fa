// Bounded caches: when full, a new entry drops the oldest insertion; an existing one drops nothing.
import t from "tap";
import { addBounded, setBounded } from "../../services/platform/bounded.ts";

t.test("a map", async (t) => {
  const m = new Map<string, number>();
  for (const [k, v] of [["a", 1], ["b", 2], ["c", 3]] as const) setBounded(m, k, v, 3);
  setBounded(m, "b", 20, 3);
  t.same([...m], [["a", 1], ["b", 20], ["c", 3]], "an existing key is overwritten in place; nothing dropped");
  setBounded(m, "d", 4, 3);
  t.same([...m.keys()], ["b", "c", "d"], "a new key drops the oldest");
});

t.test("a set", async (t) => {
  const s = new Set<string>();
  for (const v of ["a", "b", "c", "a"]) addBounded(s, v, 3);
  t.same([...s], ["a", "b", "c"]);
  addBounded(s, "d", 3);
  t.same([...s], ["b", "c", "d"]);
});
