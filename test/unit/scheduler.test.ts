// The scheduler's retry policy with a fake pass, clock and sleep: through a database outage it
// keeps running passes with capped backoff, logs the outage once at each end, and resumes by itself.
import { Writable } from "node:stream";
import t from "tap";
import { pino } from "pino";
import { runPasses } from "../../services/app/scheduler.ts";

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Line = Record<string, any>;

function memoryLogger() {
  const lines: Line[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString("utf8").split("\n")) if (l.trim()) lines.push(JSON.parse(l));
      done();
    },
  });
  return { logger: pino({ level: "debug", base: undefined }, stream), lines };
}

const refused = () => Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED", errno: -111, syscall: "connect" });

/**
 * Runs the loop over a script of pass outcomes ("ok", "down" for a refused connection, "bug" for
 * any other error) on a fake clock; returns the waits it asked for and the log lines (above debug).
 */
async function runScript(script: ("ok" | "down" | "bug")[], intervalMs = 1000, maxBackoffMs = 5000) {
  const { logger, lines } = memoryLogger();
  let now = 0;
  const waits: number[] = [];
  let passes = 0;
  let done!: () => void;
  const finished = new Promise<void>((resolve) => (done = resolve));
  const loop = runPasses({
    logger,
    intervalMs,
    maxBackoffMs,
    now: () => now,
    sleep: async (ms, signal) => {
      waits.push(ms);
      now += ms;
      if (passes < script.length) return;
      // The script has run out: wait here until stop().
      done();
      await new Promise((resolve) => signal.addEventListener("abort", resolve));
    },
    pass: async () => {
      const step = script[passes++];
      if (step === "down") throw refused();
      if (step === "bug") throw new TypeError("cannot read properties of undefined");
    },
  });
  await finished;
  await loop.stop();
  return { waits, lines: lines.filter((l) => l.level > pino.levels.values.debug!) };
}

t.test("through an outage: capped backoff, one warning, one recovery line, then the normal interval", async (t) => {
  const script = ["ok", ...Array<"down">(8).fill("down"), "ok", "ok"] as const;
  const { waits, lines } = await runScript([...script]);
  t.same(waits, [1000, 1000, 2000, 4000, 5000, 5000, 5000, 5000, 5000, 1000, 1000], "1 s, then doubling to the 5 s cap, then 1 s again");
  t.same(lines.map((l) => [pino.levels.labels[l.level], l.msg]), [
    ["warn", "database unavailable; retrying"],
    ["info", "database recovered"],
  ], "the outage is logged once at each end");
  t.match(lines[0], { what: "database", error: "connect ECONNREFUSED 127.0.0.1:5432" });
  t.match(lines[1], { failures: 8, duration_ms: 1000 + 2000 + 4000 + 5000 * 5 });
});

t.test("two outages are two warnings and two recoveries", async (t) => {
  const { lines } = await runScript(["down", "down", "ok", "down", "ok"]);
  t.same(lines.map((l) => l.msg), ["database unavailable; retrying", "database recovered", "database unavailable; retrying", "database recovered"]);
  t.same(lines.filter((l) => l.msg === "database recovered").map((l) => l.failures), [2, 1]);
});

t.test("a failure that is not an outage is logged as an error each time, and backs off too", async (t) => {
  const { waits, lines } = await runScript(["bug", "bug", "bug", "ok"], 1000, 3000);
  t.same(waits, [1000, 2000, 3000, 1000]);
  t.same(lines.map((l) => [pino.levels.labels[l.level], l.msg]), [
    ["error", "scheduler pass failed"],
    ["error", "scheduler pass failed"],
    ["error", "scheduler pass failed"],
  ], "never mistaken for an outage, no recovery line");
});

t.test("stop() ends a loop waiting out a long backoff at once", async (t) => {
  const { logger } = memoryLogger();
  let passes = 0;
  const loop = runPasses({
    logger,
    intervalMs: 60_000,
    maxBackoffMs: 600_000,
    pass: async () => {
      passes++;
      throw refused();
    },
  });
  // The first pass fails and the loop sleeps (real timers) for a minute.
  while (passes === 0) await new Promise((r) => setImmediate(r));
  const stopped = await Promise.race([loop.stop().then(() => "stopped"), new Promise((r) => setTimeout(() => r("still waiting"), 5000).unref())]);
  t.equal(stopped, "stopped");
  t.equal(passes, 1);
});
