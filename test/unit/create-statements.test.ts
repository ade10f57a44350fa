// Which creates of a burst share a statement (intents/create-batch.ts statementsOf): only those of
// one shape, in 16, 8, 4, 2 or 1 at a time (a few texts per shape, each prepared once), and never
// two of one Idempotency-Key.
import t from "tap";
import { statementsOf } from "../../services/intents/create-batch.ts";

const items = (shapes: string) => [...shapes].map((shape, i) => ({ shape, key: `k${i}` }));

t.test("one shape: the largest power of two first", async (t) => {
  t.same(statementsOf(items("a")).map((s) => s.length), [1], "a lone create alone");
  t.same(statementsOf(items("a".repeat(13))).map((s) => s.length), [8, 4, 1]);
  t.same(statementsOf(items("a".repeat(40))).map((s) => s.length), [16, 16, 8]);
  t.same(statementsOf(items("a".repeat(40))).flat(), Array.from({ length: 40 }, (_, i) => i), "each create once, in order");
});

t.test("shapes apart", async (t) => {
  t.same(statementsOf(items("abab")), [[0, 2], [1, 3]]);
  t.same(statementsOf(items("aaab")), [[0, 1], [2], [3]]);
});

t.test("a key twice: the second goes alone", async (t) => {
  const burst = [...items("aaa"), { shape: "a", key: "k1" }];
  t.same(statementsOf(burst), [[0, 1], [2], [3]]);
});
