import t from "tap";
import { Batcher } from "../../services/delivery/batcher.ts";

t.test("calls made in one turn of the event loop become one batch, results in order", async (t) => {
  const calls: number[][] = [];
  const b = new Batcher<number, string>(async (items) => {
    calls.push(items);
    return items.map((i) => `r${i}`);
  });
  const results = await Promise.all([1, 2, 3].map((i) => b.add(i)));
  t.same(results, ["r1", "r2", "r3"]);
  t.same(calls, [[1, 2, 3]], "one call for the three");
  t.same(await b.add(4), "r4", "a later call is a batch of its own");
  t.same(calls, [[1, 2, 3], [4]]);
});

t.test("a full batch goes at once; the rest follows", async (t) => {
  const calls: number[][] = [];
  const b = new Batcher<number, number>(async (items) => {
    calls.push(items);
    return items.map((i) => i * 10);
  }, { max: 2 });
  const results = await Promise.all([1, 2, 3, 4, 5].map((i) => b.add(i)));
  t.same(results, [10, 20, 30, 40, 50]);
  t.same(calls, [[1, 2], [3, 4], [5]]);
});

t.test("a failed batch rejects each of its calls, and the next batch is unaffected", async (t) => {
  let fail = true;
  const b = new Batcher<number, number>(async (items) => {
    if (fail) throw new Error("database down");
    return items;
  });
  const failed = await Promise.allSettled([b.add(1), b.add(2)]);
  t.same(
    failed.map((r) => r.status === "rejected" && (r.reason as Error).message),
    ["database down", "database down"],
  );
  fail = false;
  t.equal(await b.add(3), 3);
});

t.test("a batch failed by one item's fault: each item runs alone, and only the bad one fails", async (t) => {
  const calls: number[][] = [];
  const b = new Batcher<number, number>(
    async (items) => {
      calls.push(items);
      if (items.includes(2)) throw new Error("bad item");
      return items;
    },
    { isolate: (err) => (err as Error).message === "bad item" },
  );
  const settled = await Promise.allSettled([1, 2, 3].map((i) => b.add(i)));
  t.same(
    settled.map((r) => (r.status === "fulfilled" ? r.value : (r.reason as Error).message)),
    [1, "bad item", 3],
  );
  t.same(calls, [[1, 2, 3], [1], [2], [3]], "the batch, then each item on its own");
});
