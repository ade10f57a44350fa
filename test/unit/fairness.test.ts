import t from "tap";
import { busiest } from "../../services/app/metrics.ts";
import { EndpointGate, maxRetryInMs, minRetryInMs } from "../../services/delivery/fairness.ts";
import { nakReaches, schedule } from "../../services/delivery/schedule.ts";

const settings = { perEndpoint: 2, circuitTimeouts: 3 };

t.test("an endpoint runs at most its share; another endpoint is not held up by it", async (t) => {
  const g = new EndpointGate(settings, 10_000);
  t.same(g.tryStart("a"), { start: true });
  t.same(g.tryStart("a"), { start: true });
  t.equal(g.tryStart("a").start, false, "a's third attempt waits");
  t.same(g.tryStart("b"), { start: true }, "b starts at once");
  t.same(Object.fromEntries(g.inFlight()), { a: 2, b: 1 });
  g.finished("a", "answered", 50);
  t.same(g.tryStart("a"), { start: true }, "a slot freed by an answer is a's again");
});

t.test("messages held back come again one attempt's time per slot apart, from at least a second on", async (t) => {
  const g = new EndpointGate(settings, 10_000);
  g.tryStart("a", 0);
  g.tryStart("a", 0);
  t.same(g.tryStart("a", 0), { start: false, hold: 2 }, "nothing known: a share's worth may wait in the worker");
  t.same([g.heldBack("a", 0), g.heldBack("a", 0), g.heldBack("a", 0), g.heldBack("a", 0)], [1000, 1500, 2000, 2500], "just began: a second an attempt, 2 slots");
  t.same([g.heldBack("a", 8000), g.heldBack("a", 8000)], [1000, 5000], "later: from a second on, and the oldest attempt has run 8 s: 4 s a place");
  g.finished("a", "timeout", 10_000);
  g.finished("a", "timeout", 10_000);
  g.tryStart("a", 20_000);
  g.tryStart("a", 20_000);
  t.same([g.heldBack("a", 20_000), g.heldBack("a", 20_000)], [1000, 6000], "a slow endpoint (10 s): 5 s a place");
  for (let i = 0; i < 200; i++) g.heldBack("a", 20_000);
  t.equal(g.heldBack("a", 20_000), maxRetryInMs, "never more than 5 minutes at once");
});

t.test("an endpoint known to answer fast may have more messages waiting for its slots", async (t) => {
  const g = new EndpointGate(settings, 10_000);
  g.tryStart("b", 0);
  g.finished("b", "answered", 50);
  t.same(g.inFlight(), new Map(), "idle again");
  g.tryStart("b", 100);
  g.tryStart("b", 100);
  t.same(g.tryStart("b", 100), { start: false, hold: 40 }, "its latency is remembered while idle: 2 slots × 1 s / 50 ms");
  for (let i = 0; i < 20; i++) {
    g.finished("b", "answered", 1);
    g.tryStart("b", 100);
  }
  t.equal((g.tryStart("b", 100) as { hold: number }).hold, 64, "at most 64");
});

t.test("timeouts in a row open the circuit: one attempt at a time until one is answered", async (t) => {
  const g = new EndpointGate({ ...settings, perEndpoint: 5 }, 10_000);
  for (let i = 0; i < 3; i++) {
    g.tryStart("a");
    g.finished("a", "timeout", 10_000);
  }
  t.equal(g.openCircuits(), 1);
  t.same(g.tryStart("a"), { start: true }, "a probe");
  t.equal((g.tryStart("a") as { hold: number }).hold, 1, "one waits for it");
  t.equal(g.tryStart("a").start, false, "only one at a time");
  g.finished("a", "other", 5);
  t.equal(g.openCircuits(), 1, "a refused connection is no answer");
  g.tryStart("a");
  g.finished("a", "answered", 200);
  t.equal(g.openCircuits(), 0, "an answer (any status) closes it");
  t.same(g.inFlight(), new Map(), "an idle endpoint that answers keeps no state");
  for (let i = 0; i < 5; i++) t.same(g.tryStart("a"), { start: true }, `closed: attempt ${i + 1} of the share starts`);
});

t.test("an answer between timeouts starts the count again; 0 never opens", async (t) => {
  const g = new EndpointGate(settings, 10_000);
  for (const ending of ["timeout", "timeout", "answered", "timeout", "timeout"] as const) {
    g.tryStart("a");
    g.finished("a", ending, 10);
  }
  t.equal(g.openCircuits(), 0);
  const never = new EndpointGate({ ...settings, circuitTimeouts: 0 }, 10_000);
  for (let i = 0; i < 20; i++) {
    never.tryStart("a");
    never.finished("a", "timeout", 10);
  }
  t.equal(never.openCircuits(), 0);
});

t.test("a start that made no attempt gives its slot back", async (t) => {
  const g = new EndpointGate({ ...settings, perEndpoint: 1 }, 10_000);
  g.tryStart("a");
  g.released("a");
  t.same(g.tryStart("a"), { start: true });
});

t.test("nakReaches: a delayed NAK lands on time only when the delivery's backoff allows it", async (t) => {
  const s = schedule([60, 300, 1800], 4);
  t.ok(nakReaches(s, 1, 5000), "first delivery: any wait");
  t.notOk(nakReaches(s, 2, 5000), "second delivery: the server would hold it 240 s more");
  t.ok(nakReaches(s, 2, 240_001));
  const flat = schedule([0.2, 0.2], 3);
  t.ok(nakReaches(flat, 3, 1000), "equal delays: any delivery");
});

t.test("the per-endpoint gauge names the busiest endpoints and sums the rest", async (t) => {
  const inFlight = new Map([["e1", 4], ["e2", 1], ["e3", 3], ["e4", 2]]);
  t.same(busiest(inFlight, 2), [["e1", 4], ["e3", 3], ["other", 3]]);
  t.same(busiest(inFlight, 10), [["e1", 4], ["e3", 3], ["e4", 2], ["e2", 1]]);
});
