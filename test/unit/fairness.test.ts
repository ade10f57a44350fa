import t from "tap";
import { busiest } from "../../services/app/metrics.ts";
import { EndpointGate as Gate, firstAnswerMs, maxRetryInMs, type Attempt, type Ending, type FairnessSettings } from "../../services/delivery/fairness.ts";
import { nakReaches, schedule } from "../../services/delivery/schedule.ts";

const settings = { perEndpoint: 2, fastMs: 1000, circuitTimeouts: 3, total: 16 };

/** The gate, keeping each endpoint's running attempts in order: an attempt that ends is its endpoint's oldest. Started attempts send at once unless told. */
class EndpointGate {
  readonly gate: Gate;
  private readonly running = new Map<string, Attempt[]>();
  constructor(s: FairnessSettings) {
    this.gate = new Gate(s);
  }
  tryStart(endpoint: string, now = Date.now(), send = true) {
    const d = this.gate.tryStart(endpoint, now);
    if (!d.start) return d;
    if (send) this.gate.sending(d.attempt, now);
    this.running.set(endpoint, [...(this.running.get(endpoint) ?? []), d.attempt]);
    return { start: true };
  }
  finished(endpoint: string, ending: Ending, durationMs: number) {
    this.gate.finished(endpoint, this.running.get(endpoint)!.shift()!, ending, durationMs);
  }
  released(endpoint: string) {
    this.gate.released(endpoint, this.running.get(endpoint)!.shift()!);
  }
  standing(endpoint: string, now?: number) {
    return this.gate.standing(endpoint, now);
  }
  heldBack(endpoint: string, now?: number) {
    return this.gate.heldBack(endpoint, now);
  }
  inFlight() {
    return this.gate.inFlight();
  }
  openCircuits() {
    return this.gate.openCircuits();
  }
}

/** Starts `n` attempts of `endpoint` at `now`; how many started. */
function startMany(g: EndpointGate, endpoint: string, n: number, now = Date.now()): number {
  let started = 0;
  for (let i = 0; i < n; i++) if (g.tryStart(endpoint, now).start) started++;
  return started;
}

t.test("an endpoint not known yet runs at most its cap; another endpoint is not held up by it", async (t) => {
  const g = new EndpointGate(settings);
  const sent = Date.now();
  t.same(g.tryStart("a", sent), { start: true });
  t.same(g.tryStart("a", sent), { start: true });
  t.same(g.tryStart("a", sent), { start: false, hold: 16, counted: false }, "a's third attempt: as many as the worker's slots may wait in the worker (perhaps a fast endpoint's burst), not holding up the pull");
  t.equal(g.heldBack("a", sent), 4000, "the rest come back once it is known: at the latest when its first requests have waited 4 × fastMs");
  t.equal(g.heldBack("a", sent + 3000), 1000, "3 s later: in the second left until then");
  t.equal(g.heldBack("a", sent + 3900), firstAnswerMs, "and never sooner than firstAnswerMs");
  t.same(g.tryStart("b"), { start: true }, "b starts at once");
  t.equal(g.standing("a", Date.now() + 3000), "unknown", "a's first requests unanswered for 3 s: a is still not known (a first request pays for its connection)");
  t.equal(g.standing("a", Date.now() + 4001), "slow", "after 4 × fastMs: a is slow");
  t.same(g.tryStart("a", Date.now() + 4001), { start: false, hold: 0, counted: false }, "its messages go back to JetStream");
  t.same(Object.fromEntries(g.inFlight()), { a: 2, b: 1 });
});

t.test("an endpoint that answers 2xx fast grows to the whole worker, its messages waiting in the worker meanwhile", async (t) => {
  const g = new EndpointGate(settings);
  t.equal(startMany(g, "f", 2), 2);
  g.finished("f", "success", 5);
  g.finished("f", "success", 5);
  t.equal(g.standing("f"), "fast");
  t.equal(startMany(g, "f", 10), 4, "two fast successes: 2 more slots");
  const over = g.tryStart("f");
  t.same(over, { start: false, hold: 16, counted: true }, "over its limit: waits in the worker, counted against the pull");
  // Each fast success adds a slot: a burst takes the worker within a few rounds.
  for (let round = 0; round < 4; round++) {
    const running = g.inFlight().get("f") ?? 0;
    for (let i = 0; i < running; i++) g.finished("f", "success", 5);
    startMany(g, "f", 100);
  }
  t.equal(g.inFlight().get("f"), 16, "all 16 slots of the worker");
  t.equal(g.tryStart("g").start, false, "a full worker starts nothing more");
  t.same(g.tryStart("g"), { start: false, hold: 16, counted: false }, "another endpoint's message waits for a free slot");
  g.finished("f", "success", 5);
  t.same(g.tryStart("g"), { start: true }, "and starts as soon as one frees");
  // Remembered while idle.
  for (let i = 0; i < 15; i++) g.finished("f", "success", 5);
  g.finished("g", "success", 5);
  t.same(g.inFlight(), new Map(), "idle");
  t.equal(startMany(g, "f", 100), 16, "after a pause the fast endpoint takes the worker at once");
});

t.test("a fast endpoint that fails, slows down or hangs is back to its cap", async (t) => {
  const g = new EndpointGate(settings);
  startMany(g, "f", 2);
  g.finished("f", "success", 5);
  g.finished("f", "success", 5);
  startMany(g, "f", 4);
  for (let i = 0; i < 4; i++) g.finished("f", "success", 5);
  t.equal(startMany(g, "f", 100, 0), 8, "grown to 8");
  for (let i = 0; i < 8; i++) g.finished("f", i === 0 ? "other" : "success", 5);
  t.equal(g.standing("f"), "fast", "one failure among successes: still fast");
  t.equal(startMany(g, "f", 100, 0), 9, "a refused connection takes it back to the cap, seven successes since add seven");

  const hang = new EndpointGate(settings);
  startMany(hang, "h", 2, 0);
  hang.finished("h", "success", 5);
  hang.finished("h", "success", 5);
  t.equal(startMany(hang, "h", 4, 0), 4, "fast: 4 slots");
  t.equal(hang.standing("h", 500), "fast");
  t.equal(hang.standing("h", 1001), "slow", "an attempt running longer than fastMs makes it slow at once");
  t.same(hang.tryStart("h", 1001), { start: false, hold: 16, counted: true }, "slow for a moment: nothing more starts, but its messages still wait in the worker, counted against the pull");
  t.equal(hang.standing("h", 4000), "slow");
  t.same(hang.tryStart("h", 4000), { start: false, hold: 16, counted: true }, "up to 4 × fastMs of waiting");
  t.same(hang.tryStart("h", 4001), { start: false, hold: 0, counted: false }, "longer: slow, and nothing waits in the worker");
  for (let i = 0; i < 2; i++) hang.finished("h", "timeout", 10_000);
  for (let i = 0; i < 2; i++) hang.finished("h", "answered", 9000);
  t.equal(startMany(hang, "h", 2, 10_000), 2, "timeouts and slow answers: its cap");
  t.same(hang.tryStart("h", 10_000), { start: false, hold: 0, counted: false }, "and nothing waits in the worker, whatever its requests have waited");

  const blip = new EndpointGate(settings);
  startMany(blip, "b", 2, 0);
  for (let i = 0; i < 2; i++) blip.finished("b", "success", 5);
  t.equal(startMany(blip, "b", 4, 0), 4);
  t.same(blip.tryStart("b", 1500), { start: false, hold: 16, counted: true }, "a request waiting 1.5 s");
  for (let i = 0; i < 3; i++) blip.finished("b", "success", 5);
  blip.finished("b", "success", 1500);
  t.equal(blip.standing("b", 1600), "fast", "it answered: its recent requests still fast on average, it is fast again");
  t.same(blip.tryStart("b", 1600), { start: true }, "and its waiting messages start");

  const busy = new EndpointGate(settings);
  busy.tryStart("f", 0);
  busy.finished("f", "success", 5);
  busy.tryStart("f", 0, false);
  t.equal(busy.standing("f", 5000), "fast", "an attempt still waiting for its claim (the service busy, nothing sent) says nothing about the endpoint");

  const slow = new EndpointGate(settings);
  startMany(slow, "s", 2);
  slow.finished("s", "success", 3000);
  t.equal(slow.standing("s"), "slow", "2xx, but after 3 s");
  t.same(slow.tryStart("s"), { start: true });
  t.same(slow.tryStart("s"), { start: false, hold: 0, counted: false }, "its cap, and its messages go back to JetStream");
});

t.test("an endpoint that fails quickly grows within the half of the worker, and about a second's worth of its messages wait in the worker", async (t) => {
  const g = new EndpointGate(settings);
  startMany(g, "e", 2);
  g.finished("e", "success", 50);
  g.finished("e", "other", 50);
  t.equal(g.standing("e"), "fast", "one failure after a success is not failing");
  startMany(g, "e", 1);
  g.finished("e", "answered", 50);
  t.equal(g.standing("e"), "failing", "most of its recent attempts failed");
  g.tryStart("n");
  g.finished("n", "answered", 5);
  t.equal(g.standing("n"), "failing", "a new endpoint whose first answer is a 503 is failing at once");
  t.equal(startMany(g, "e", 10), 3, "one quick answer added a slot");
  for (let round = 0; round < 3; round++) {
    const running = g.inFlight().get("e") ?? 0;
    for (let i = 0; i < running; i++) g.finished("e", "answered", 50);
    startMany(g, "e", 100);
  }
  t.equal(g.inFlight().get("e"), 8, "at most half of the worker's 16 slots");
  t.same(g.tryStart("e"), { start: false, hold: 16, counted: false }, "8 slots × 1 s / 50 ms = 160, at most the worker's 16; they do not hold up the pull");
  t.same(g.tryStart("q"), { start: true }, "a new endpoint's first attempt starts");
  t.same(g.tryStart("q"), { start: false, hold: 16, counted: false }, "but not its second: e's 8, its first among them, take the shared half");
  g.tryStart("f");
  g.finished("f", "success", 50);
  t.equal(startMany(g, "f", 10), 3, "the other half is there for a fast endpoint (its limit after one quick success)");
});

t.test("endpoints not known fast share at most half the worker, a new endpoint's first attempt aside", async (t) => {
  const g = new EndpointGate({ ...settings, perEndpoint: 4 });
  let started = 0;
  for (const e of ["a", "b", "c", "d"]) started += startMany(g, e, 4);
  t.equal(started, 4 + 8, "4 first attempts, then 8 more (half of 16)");
  t.same(g.tryStart("q"), { start: true }, "a quiet endpoint's first attempt still starts");
  g.finished("a", "timeout", 2000);
  t.same(g.tryStart("c"), { start: false, hold: 16, counted: false }, "a's first attempt ending frees no share");
  g.finished("a", "timeout", 2000);
  t.same(g.tryStart("c"), { start: true }, "a share freed by a's second goes to whoever asks");
});

t.test("known failing or hanging endpoints' first attempts count in the half: many of them never take the whole worker", async (t) => {
  const g = new EndpointGate(settings);
  const endpoints = Array.from({ length: 12 }, (_, i) => `down${i}`);
  for (const e of endpoints) {
    for (let i = 0; i < 2; i++) {
      g.tryStart(e);
      g.finished(e, "answered", 5);
    }
  }
  t.equal(endpoints.filter((e) => g.standing(e) === "failing").length, 12, "12 endpoints answering 503");
  let started = 0;
  for (const e of endpoints) started += startMany(g, e, 1);
  t.equal(started, 8, "one attempt each for 8 of them: the half of 16");
  t.same(g.tryStart("new"), { start: true }, "a new endpoint's first attempt starts");
  g.tryStart("fast");
  g.finished("fast", "success", 20);
  t.equal(startMany(g, "fast", 16), 3, "a fast endpoint starts as many as its limit");
});

t.test("messages held back come again one attempt's time per slot apart, from at least a second on (100 ms for a quick endpoint)", async (t) => {
  const g = new EndpointGate(settings);
  startMany(g, "e", 2, 0);
  g.finished("e", "answered", 50);
  g.finished("e", "answered", 50);
  t.same([g.heldBack("e", 0), g.heldBack("e", 0), g.heldBack("e", 0), g.heldBack("e", 0)], [100, 113, 125, 138], "failing quickly (50 ms, 4 slots): 12.5 ms a place, from 100 ms on");
  t.equal(g.heldBack("a", 0), 4000, "not known yet, no request sent: back when a request of it would have made it slow, whatever is queued");
  startMany(g, "f", 1, 0);
  g.finished("f", "success", 160);
  t.equal(g.standing("f", 0), "fast", "one quick success: fast, its limit one over the starting one");
  t.same([g.heldBack("f", 0), g.heldBack("f", 0), g.heldBack("f", 0)], [100, 110, 120], "fast (160 ms): spaced by the whole worker's 16 slots, 10 ms a place, never by its starting limit (53 ms)");
  g.tryStart("h", 0);
  g.finished("h", "timeout", 10_000);
  g.tryStart("h", 0);
  g.tryStart("h", 0);
  t.same([g.heldBack("h", 8000), g.heldBack("h", 8000)], [5000, 10_000], "hanging (10 s, its cap of 2): 5 s a place");
  for (let i = 0; i < 200; i++) g.heldBack("h", 8000);
  t.equal(g.heldBack("h", 8000), maxRetryInMs, "never more than 15 minutes at once");
});

t.test("timeouts in a row open the circuit: one attempt at a time until one is answered", async (t) => {
  const g = new EndpointGate({ ...settings, perEndpoint: 5 });
  for (let i = 0; i < 3; i++) {
    g.tryStart("a");
    g.finished("a", "timeout", 10_000);
  }
  t.equal(g.openCircuits(), 1);
  t.same(g.tryStart("a"), { start: true }, "a probe");
  t.same(g.tryStart("a"), { start: false, hold: 0, counted: false }, "only one at a time, nothing waits");
  g.finished("a", "other", 5);
  t.equal(g.openCircuits(), 1, "a refused connection is no answer");
  g.tryStart("a");
  g.finished("a", "answered", 200);
  t.equal(g.openCircuits(), 0, "an answer (any status) closes it");
  t.equal(startMany(g, "a", 10), 5, "closed: its cap again");
});

t.test("an answer between timeouts starts the count again; 0 never opens", async (t) => {
  const g = new EndpointGate(settings);
  for (const ending of ["timeout", "timeout", "answered", "timeout", "timeout"] as const) {
    g.tryStart("a");
    g.finished("a", ending, 10);
  }
  t.equal(g.openCircuits(), 0);
  const never = new EndpointGate({ ...settings, circuitTimeouts: 0 });
  for (let i = 0; i < 20; i++) {
    never.tryStart("a");
    never.finished("a", "timeout", 10);
  }
  t.equal(never.openCircuits(), 0);
});

t.test("a start that made no attempt gives its slot back", async (t) => {
  const g = new EndpointGate({ ...settings, perEndpoint: 1 });
  g.tryStart("a");
  g.released("a");
  t.same(g.tryStart("a"), { start: true });
  t.equal(g.standing("a"), "unknown", "nothing learnt from it");
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

t.test("across workers: an attempt of an endpoint not known fast needs a shared slot; a fast endpoint's does not", async (t) => {
  const g = new Gate(settings);
  const now = Date.now();
  const first = g.tryStart("a", now);
  t.ok(first.start && first.attempt.capped && first.attempt.cap === 2, "a new endpoint's attempt is capped at the endpoint's limit");
  if (!first.start) return;
  g.sending(first.attempt, now);
  g.finished("a", first.attempt, "success", 20);
  const fast = g.tryStart("a", now);
  t.ok(fast.start && !fast.attempt.capped, "once it is fast, its attempts take no shared slot");
});

t.test("every shared slot held elsewhere: the attempt gives its place back, and what others waited counts here", async (t) => {
  const g = new Gate(settings);
  const now = Date.now();
  const d = g.tryStart("a", now);
  if (!d.start) return t.fail("started");
  g.slotAnswer("a", d.attempt, { busyMs: 5000, circuitOpen: false }, now);
  t.same(Object.fromEntries(g.inFlight()), {}, "the refused attempt does not count as running here");
  t.equal(g.standing("a", now), "slow", "another worker's request has waited 5 s (over 4 × fastMs): slow here too");
  t.same(g.tryStart("a", now + 500), { start: false, hold: 0, counted: false }, "nothing starts for a second; its messages go back to JetStream");
  t.ok(g.heldBack("a", now + 500) >= 1000, "spaced by the wait seen elsewhere");
  const again = g.tryStart("a", now + 1001);
  t.ok(again.start, "a second later it may try again");
  if (!again.start) return;
  g.slotAnswer("a", again.attempt, { busyMs: undefined, circuitOpen: false }, now + 1001);
  t.same(Object.fromEntries(g.inFlight()), { a: 1 }, "granted: it runs");

  const h = new Gate(settings);
  const e = h.tryStart("b", now);
  if (!e.start) return t.fail("started");
  h.slotAnswer("b", e.attempt, { busyMs: 50, circuitOpen: false }, now);
  t.equal(h.standing("b", now), "unknown", "a short wait elsewhere says nothing yet");
  t.notOk(h.tryStart("b", now + 50).start, "it tries again after 100 ms, not at once");
  t.ok(h.tryStart("b", now + 101).start);
  t.equal(h.standing("b", now + 60_000), "unknown", "what it was told is forgotten after a while: a try asks again");
});

t.test("a circuit opened by other workers' timeouts holds here: one at a time until an answer", async (t) => {
  const g = new Gate({ ...settings, perEndpoint: 5 });
  const d = g.tryStart("a");
  if (!d.start) return t.fail("started");
  g.slotAnswer("a", d.attempt, { busyMs: undefined, circuitOpen: true });
  t.equal(g.openCircuits(), 1, "open here as it is everywhere");
  t.notOk(g.tryStart("a").start, "one at a time");
  t.ok(g.owesCircuit("a"), "its answer must be told to the others");
  g.sending(d.attempt);
  g.finished("a", d.attempt, "answered", 30);
  t.equal(g.openCircuits(), 0, "its answer closes it");
  g.sharedCircuit("a", true);
  t.equal(g.openCircuits(), 1, "reopened by the shared record");
  g.sharedCircuit("a", false);
  t.equal(g.openCircuits(), 0);
});
