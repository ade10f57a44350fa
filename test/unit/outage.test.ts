import { Writable } from "node:stream";
import t from "tap";
import { pino } from "pino";
import { nextDelay, OutageLog } from "../../services/platform/outage.ts";

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Line = Record<string, any>;

/** A debug-level pino logger writing JSON lines into memory. */
function memoryLogger(level = "debug") {
  const lines: Line[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString("utf8").split("\n")) if (l.trim()) lines.push(JSON.parse(l));
      done();
    },
  });
  // To a plain Writable pino writes synchronously: a line is there as soon as the call returns.
  const logger = pino({ level, base: undefined }, stream);
  const at = (name: string) => lines.filter((l) => l.level === pino.levels.values[name]);
  return { logger, lines, at };
}

t.test("an outage logs one warning when it starts and one info line when it ends", async (t) => {
  const { logger, lines, at } = memoryLogger();
  let now = 1_000_000;
  const outage = new OutageLog(logger, "database", () => now);
  t.equal(outage.failing, false);

  outage.recovered();
  t.same(lines, [], "recovered without an outage logs nothing");

  outage.failed(Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED" }));
  for (let i = 0; i < 20; i++) {
    now += 500;
    outage.failed(new Error("Connection terminated unexpectedly"));
  }
  t.equal(outage.failing, true);
  t.equal(outage.failures, 21);
  t.equal(at("warn").length, 1, "one warning for 21 failures");
  t.match(at("warn")[0], { what: "database", error: "connect ECONNREFUSED 127.0.0.1:5432", msg: /^database / });
  t.ok(lines.filter((l) => l.level > pino.levels.values.debug!).length === 1, "later failures log nothing above debug");
  t.equal(at("debug").length, 20, "each later failure at debug");

  now += 250;
  outage.recovered();
  t.same(at("info").map(({ msg, duration_ms, failures, what }) => ({ msg, duration_ms, failures, what })), [
    { msg: "database recovered", duration_ms: 10_250, failures: 21, what: "database" },
  ]);
  t.equal(outage.failing, false);
  t.equal(outage.failures, 0);

  outage.recovered();
  t.equal(at("info").length, 1, "recovered again logs nothing");

  outage.failed(new Error("the database system is starting up"));
  t.equal(at("warn").length, 2, "the next outage warns again");
  now += 40;
  outage.recovered();
  t.match(at("info")[1], { msg: "database recovered", duration_ms: 40, failures: 1 });
});

t.test("only the error's message is logged, never its fields", async (t) => {
  const { logger, lines } = memoryLogger();
  const outage = new OutageLog(logger, "relay");
  const err = Object.assign(new Error("publish failed"), {
    config: { password: "hunter2-secret", connectionString: "postgres://u:hunter2-secret@db/x" },
    query: "insert into api_keys values ('sk_test_secret')",
  });
  outage.failed(err);
  outage.failed(err);
  outage.recovered();
  const text = JSON.stringify(lines);
  t.notMatch(text, /hunter2|sk_test_secret|insert into/, "no field of the error reaches the log");
  t.match(lines[0], { level: pino.levels.values.warn, what: "relay", error: "publish failed" });
  t.notOk("err" in lines[0]!, "no serialized error object");
  t.match(lines.at(-1), { msg: "relay recovered" });
});

t.test("a non-Error failure is logged as text", async (t) => {
  const { logger, lines } = memoryLogger();
  const outage = new OutageLog(logger, "relay");
  outage.failed("socket closed");
  t.match(lines[0], { error: "socket closed" });
});

t.test("nextDelay doubles from the base and stops at the cap", async (t) => {
  t.same([0, 1, 2, 3, 4, 5, 6].map((n) => nextDelay(n, 1000, 10_000)), [1000, 1000, 2000, 4000, 8000, 10_000, 10_000]);
  t.equal(nextDelay(1_000_000, 1000, 30_000), 30_000, "a very long outage stays at the cap");
  t.equal(nextDelay(3, 5000, 2000), 2000, "a cap below the base wins");
});
