import t from "tap";
import { ackWaitWithoutBackoffMs, attemptSpanSeconds, delayAfter, nakDelayFor, schedule } from "../../services/delivery/schedule.ts";

const defaults = [60, 300, 1800, 7200, 43200];
const defaultMs = [60_000, 300_000, 1_800_000, 7_200_000, 43_200_000];

t.test("default schedule", async (t) => {
  const s = schedule(defaults, 6);
  t.equal(s.maxAttempts, 6);
  t.same(s.backoffMs, defaultMs);
});

t.test("delayAfter follows the list, then repeats the last delay", async (t) => {
  const s = schedule(defaults, 6);
  for (let n = 1; n <= 5; n++) t.equal(delayAfter(s, n), defaultMs[n - 1], `after attempt ${n}`);
  for (const n of [6, 7, 10, 100]) t.equal(delayAfter(s, n), 43_200_000, `after attempt ${n}`);
});

t.test("max attempts 3 keeps 2 delays (JetStream needs max_deliver > backoff length)", async (t) => {
  const s = schedule(defaults, 3);
  t.equal(s.maxAttempts, 3);
  t.same(s.backoffMs, [60_000, 300_000]);
  t.equal(delayAfter(s, 1), 60_000);
  t.equal(delayAfter(s, 2), 300_000);
  t.equal(delayAfter(s, 3), 300_000);
});

t.test("max attempts 2 keeps 1 delay", async (t) => {
  t.same(schedule(defaults, 2).backoffMs, [60_000]);
});

t.test("max attempts 1 gives an empty backoff", async (t) => {
  const s = schedule(defaults, 1);
  t.equal(s.maxAttempts, 1);
  t.same(s.backoffMs, []);
  t.equal(delayAfter(s, 1), ackWaitWithoutBackoffMs, "ack wait falls back to the default");
});

t.test("the backoff list is always shorter than max attempts", async (t) => {
  for (let max = 1; max <= 12; max++) {
    for (const delays of [[], [5], defaults, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]]) {
      const s = schedule(delays, max);
      t.ok(s.backoffMs.length < max, `max ${max}, ${delays.length} delays -> ${s.backoffMs.length}`);
      t.equal(s.backoffMs.length, Math.min(delays.length, max - 1), `max ${max}, ${delays.length} delays length`);
    }
  }
});

t.test("decimal seconds become whole milliseconds", async (t) => {
  t.same(schedule([0.2], 2).backoffMs, [200]);
  t.same(schedule([0.2, 1.5, 0.001, 2.25], 5).backoffMs, [200, 1500, 1, 2250]);
  t.same(schedule([0.1, 0.7], 3).backoffMs, [100, 700], "no floating-point fractions (0.7 * 1000 = 700.0000000000001)");
  for (const ms of schedule([0.1, 0.3, 0.7, 1.1, 2.3], 6).backoffMs) t.ok(Number.isInteger(ms), `${ms} is an integer`);
});

t.test("more attempts than delays repeats the last delay", async (t) => {
  const s = schedule([1, 2], 6);
  t.same(s.backoffMs, [1000, 2000]);
  t.equal(delayAfter(s, 1), 1000);
  for (const n of [2, 3, 4, 5, 6]) t.equal(delayAfter(s, n), 2000, `after attempt ${n}`);
});

t.test("the input list is not modified", async (t) => {
  const delays = [60, 300, 1800];
  schedule(delays, 2);
  t.same(delays, [60, 300, 1800]);
});

// What nats-server does with a delayed NAK on a consumer with a backoff (consumer.go: processNak
// backdates the message by ack wait = backoff[0]; checkPending compares with backoff[n-1]).
function serverWait(s: ReturnType<typeof schedule>, deliveryCount: number, nakDelayMs: number): number {
  const list = s.backoffMs.length > 0 ? s.backoffMs : [ackWaitWithoutBackoffMs];
  return nakDelayMs + list[Math.min(deliveryCount, list.length) - 1]! - list[0]!;
}

t.test("nakDelayFor: the server then waits exactly the asked time, at every delivery count", async (t) => {
  for (const s of [schedule(defaults, 6), schedule([2, 30], 3), schedule([1, 2, 3, 4, 5], 6), schedule(defaults, 1)]) {
    for (let n = 1; n <= s.maxAttempts + 2; n++) {
      for (const wait of [delayAfter(s, n), 1_000, 5_000, 90_000]) {
        const delay = nakDelayFor(s, n, wait);
        t.not(delay, 0, "never 0 (a bare NAK redelivers at once)");
        t.ok(Math.abs(serverWait(s, n, delay) - wait) <= 1, `backoff ${s.backoffMs.join(",") || "none"}, delivery ${n}: ${wait} ms`);
      }
    }
  }
});

t.test("nakDelayFor: a retry on schedule is a NAK of backoff[0], whatever the delivery count", async (t) => {
  const s = schedule(defaults, 6);
  for (let n = 1; n <= 5; n++) t.equal(nakDelayFor(s, n, delayAfter(s, n)), 60_000, `delivery ${n}`);
});

t.test("attemptSpanSeconds: the waits between a delivery's attempts, and a day", async (t) => {
  t.equal(attemptSpanSeconds(schedule([60, 300, 1800, 7200, 43200], 6)), 60 + 300 + 1800 + 7200 + 43200 + 86_400, "the default schedule: 14.6 hours and a day");
  t.equal(attemptSpanSeconds(schedule([60, 300], 5)), 60 + 300 + 300 + 300 + 86_400, "the last wait repeats");
  t.equal(attemptSpanSeconds(schedule([60], 1)), 86_400, "one attempt: the day alone");
  t.equal(attemptSpanSeconds(schedule([0.5], 2)), 1 + 86_400, "part of a second counts whole");
});
