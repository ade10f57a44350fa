// The bench's CPU meter: time spent on the server's event loop, by PostgreSQL for its database,
// and by the load generator, per request, read from /proc; and the whole machine's.
import { existsSync } from "node:fs";
import pg from "pg";
import t from "tap";
import { availableParallelism } from "node:os";
import { backendsOf, eventLoopMs, meterCpu, meterGroups, meterMachine, processesNamed, statTicks } from "../bench/cpu.ts";
import { createTestDatabase } from "../helpers/harness.ts";

/** Spins until this thread has used `ms` more of CPU (not of wall time, which a busy machine stretches). */
function burn(ms: number): void {
  const start = process.threadCpuUsage();
  const used = () => {
    const now = process.threadCpuUsage(start);
    return (now.user + now.system) / 1000;
  };
  while (used() < ms);
}

t.test("the meter", { skip: existsSync("/proc/self/stat") ? false : "needs Linux /proc" }, async (t) => {
  t.test("a process's CPU ticks; nothing for one that is gone", async (t) => {
    t.ok((statTicks("self") ?? -1) >= 0);
    t.equal(statTicks("999999999"), undefined);
    const before = eventLoopMs(process.pid) as number;
    burn(100);
    t.ok((eventLoopMs(process.pid) as number) - before >= 90, "the event loop's own milliseconds");
  });

  t.test("CPU on the server's event loop, per request", async (t) => {
    // This process plays the server (its event loop burns) and is also the load generator.
    const meter = meterCpu({ pid: process.pid, database: "no_such_database" });
    burn(300);
    const cpu = meter.stop(100);
    if (!cpu) return t.fail("no reading");
    // 300 ms over 100 requests: 3 ms each, give or take /proc's 10 ms ticks and the test's own work.
    t.ok(cpu.eventLoop >= 2.5 && cpu.eventLoop <= 4, `event loop ${cpu.eventLoop} ms per request`);
    t.equal(cpu.postgres, 0, "no backends of a database nobody uses");
    t.ok(cpu.loadGenerator >= 2.5, "this process is the load generator too");
    t.equal(cpu.total, cpu.eventLoop + cpu.otherThreads + cpu.postgres + cpu.loadGenerator);
    t.equal(meter.stop(0), undefined, "no requests, no figure");
  });

  t.test("CPU of named groups of processes, per item", async (t) => {
    t.ok(processesNamed("node").includes(process.pid), "this process, by its command");
    t.same(processesNamed("no-such-command"), []);
    const meter = meterGroups({ self: () => [process.pid], nobody: () => [] });
    burn(300);
    const cpu = meter.stop(100);
    if (!cpu) return t.fail("no reading");
    t.ok(cpu.self >= 2.5 && cpu.self <= 4, `this process ${cpu.self} ms per item`);
    t.equal(cpu.nobody, 0, "a group with no process");
    t.equal(meter.stop(0), undefined, "no items, no figure");
  });

  t.test("the whole machine's CPU, per item, and the cores in use", async (t) => {
    const meter = meterMachine();
    burn(300);
    const cpu = meter.stop(100);
    if (!cpu) return t.fail("no reading");
    // This process's 300 ms at least; whatever else the machine ran meanwhile (other tests) too.
    t.ok(cpu.msPerItem >= 2.5, `the machine ${cpu.msPerItem} ms per item`);
    t.ok(cpu.kernelMsPerItem >= 0 && cpu.kernelMsPerItem <= cpu.msPerItem, `of which the kernel's ${cpu.kernelMsPerItem} ms`);
    t.ok(cpu.cores > 0 && cpu.cores <= availableParallelism() + 0.01, `${cpu.cores} of ${availableParallelism()} cores in use`);
    t.equal(meter.stop(0), undefined, "no items, no figure");
  });

  t.test("PostgreSQL's backends of the database, by their title", async (t) => {
    const url = await createTestDatabase(t);
    const database = new URL(url).pathname.slice(1);
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    t.teardown(() => client.end());
    const { rows } = await client.query<{ pid: number }>("select pg_backend_pid() as pid");
    t.same(backendsOf(database), [rows[0]!.pid], "this connection's backend and nothing else");
    const meter = meterCpu({ pid: process.pid, database });
    // Work only the backend does: about a second of CPU there, almost none here.
    await client.query("select count(*) from generate_series(1, 4000000) a, generate_series(1, 2) b");
    const cpu = meter.stop(10);
    if (!cpu) return t.fail("no reading");
    t.ok(cpu.postgres > cpu.eventLoop, `postgres ${cpu.postgres} ms per request, event loop ${cpu.eventLoop}`);
    t.ok(cpu.postgres >= 10, "the query's CPU is counted against the database");

    // A pool that closed its idle connections opens new ones under the load: those count too.
    const later = meterCpu({ pid: process.pid, database });
    const fresh = new pg.Client({ connectionString: url });
    await fresh.connect();
    t.teardown(() => fresh.end());
    await fresh.query("select count(*) from generate_series(1, 4000000) a, generate_series(1, 2) b");
    t.ok((later.stop(10)?.postgres ?? 0) >= 10, "a backend that connected during the load");
  });
});
