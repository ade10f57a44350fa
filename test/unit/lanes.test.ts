// Which lane a delivery's message takes (delivery/lanes.ts): a merchant's share of the main lane.
import t from "tap";
import { Lanes } from "../../services/delivery/lanes.ts";

t.test("a merchant within its share stays on the main lane; its surplus takes the backlog lane; others are not touched", async (t) => {
  let now = 0;
  const lanes = new Lanes({ perSecond: 10, burst: 5 }, () => now);
  const a = Array.from({ length: 8 }, () => lanes.take("mer_a"));
  t.same(a, ["main", "main", "main", "main", "main", "backlog", "backlog", "backlog"], "a burst of 5, then the backlog lane");
  t.equal(lanes.take("mer_b"), "main", "another merchant's share is its own");
  now += 100; // 0.1 s: one token back at 10 a second
  t.equal(lanes.take("mer_a"), "main", "the share refills at its rate");
  t.equal(lanes.take("mer_a"), "backlog");
  now += 60_000;
  t.same(Array.from({ length: 6 }, () => lanes.take("mer_a")), ["main", "main", "main", "main", "main", "backlog"], "never more than a burst at once, however long it was quiet");
});

t.test("a steady merchant under its rate never leaves the main lane", async (t) => {
  let now = 0;
  const lanes = new Lanes({ perSecond: 40, burst: 200 }, () => now);
  const taken = [];
  // 20 a second for 10 minutes: the backlog bench's merchant B.
  for (let i = 0; i < 20 * 600; i++, now += 50) taken.push(lanes.take("mer_b"));
  t.ok(taken.every((l) => l === "main"));
});
