// CPU time per request by who spent it, read from /proc (Linux) around one load: the service's
// event loop, its other threads (address derivation, GC helpers, libuv), the PostgreSQL backends
// serving the bench's database, and the load generator (this process). A sampling profile shows
// only the event loop; on a machine whose cores are all busy, throughput is set by the sum.
import { readdirSync, readFileSync } from "node:fs";
import { availableParallelism } from "node:os";

/** Milliseconds of CPU per request. */
export interface CpuPerRequest {
  eventLoop: number;
  otherThreads: number;
  postgres: number;
  loadGenerator: number;
  total: number;
}

export interface CpuSubject {
  /** The server process under load. */
  pid: number;
  /** Its database: the PostgreSQL backends connected to it are counted. */
  database: string;
}

// /proc reports utime and stime in clock ticks of USER_HZ, which Linux fixes at 100 per second.
const msPerTick = 10;

/** utime + stime of /proc/<path>/stat, in ticks; undefined if it cannot be read. */
export function statTicks(path: string): number | undefined {
  try {
    const stat = readFileSync(`/proc/${path}/stat`, "utf8");
    // Fields after the command name, which is in parentheses and may contain spaces.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return undefined;
  }
}

/** A process's main thread (its event loop, for Node): its task id is the process id. */
const mainThread = (pid: number) => `${pid}/task/${pid}`;

/** Milliseconds of CPU a process's main thread has used so far. */
export function eventLoopMs(pid: number): number | undefined {
  const ticks = statTicks(mainThread(pid));
  return ticks === undefined ? undefined : ticks * msPerTick;
}

/** The pids of the processes for which `test` holds, given the /proc/<pid> file it reads. */
function processesWhere(file: string, test: (content: string) => boolean): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (test(readFileSync(`/proc/${entry}/${file}`, "utf8"))) pids.push(Number(entry));
    } catch {
      // Gone meanwhile.
    }
  }
  return pids;
}

/**
 * The pids of the PostgreSQL backends connected to the database (their title names it), or only
 * those whose client's port (the title's "host(port)") `clientPort` accepts.
 */
export function backendsOf(database: string, clientPort: (port: number) => boolean = () => true): number[] {
  return processesWhere("cmdline", (title) => {
    if (!title.startsWith("postgres: ") || !title.split(" ").includes(database)) return false;
    const port = /\((\d+)\)/.exec(title)?.[1];
    return clientPort(port === undefined ? 0 : Number(port));
  });
}

/** The pids of processes whose command (comm) is `name`, e.g. nats-server. */
export function processesNamed(name: string): number[] {
  return processesWhere("comm", (comm) => comm.trim() === name);
}

/**
 * Starts counting; `stop(requests)` gives the CPU per request since, or undefined where /proc
 * is not there. A backend that connected during the load counts whole (a pool may have closed
 * its idle connections before and open new ones under the load); one that exited is left out.
 */
export function meterCpu(subject: CpuSubject): { stop(requests: number): CpuPerRequest | undefined } {
  const meter = meterGroups({
    process: () => [subject.pid],
    eventLoop: () => [mainThread(subject.pid)],
    postgres: () => backendsOf(subject.database),
    loadGenerator: () => ["self"],
  });
  return {
    stop(requests) {
      const cpu = meter.stop(requests);
      if (!cpu) return undefined;
      const { eventLoop, postgres, loadGenerator } = cpu;
      const otherThreads = cpu.process - eventLoop;
      return { eventLoop, otherThreads, postgres, loadGenerator, total: eventLoop + otherThreads + postgres + loadGenerator };
    },
  };
}

/**
 * Starts counting the CPU of named groups of processes or threads, each given by its /proc paths
 * (a pid, "<pid>/task/<tid>", "self"), listed again at the end, so that one that started meanwhile
 * counts whole and one that ended is left out; `stop(items)` gives each group's milliseconds of
 * CPU per item, or undefined where /proc is not there.
 */
export function meterGroups<K extends string>(groups: Record<K, () => readonly (number | string)[]>): { stop(items: number): Record<K, number> | undefined } {
  const ticksOf = () => {
    const out = new Map<K, Map<string, number>>();
    for (const [name, paths] of Object.entries(groups) as [K, () => readonly (number | string)[]][]) {
      const m = new Map<string, number>();
      for (const path of paths()) {
        const t = statTicks(String(path));
        if (t !== undefined) m.set(String(path), t);
      }
      out.set(name, m);
    }
    return out;
  };
  const start = ticksOf();
  return {
    stop(items) {
      if (statTicks("self") === undefined || items <= 0) return undefined;
      const end = ticksOf();
      const result = {} as Record<K, number>;
      for (const [name, paths] of end) {
        let ticks = 0;
        for (const [path, t] of paths) ticks += t - (start.get(name)?.get(path) ?? 0);
        result[name] = (ticks * msPerTick) / items;
      }
      return result;
    },
  };
}

/** The machine's busy and total CPU time so far from /proc/stat's first line, in ticks; undefined if it cannot be read. */
function machineTicks(): { busy: number; kernel: number; all: number } | undefined {
  try {
    const line = readFileSync("/proc/stat", "utf8").split("\n")[0] ?? "";
    // cpu user nice system idle iowait irq softirq steal (guest time is counted in user already).
    const [user, nice, system, idle, iowait, irq, softirq, steal] = line.trim().split(/\s+/).slice(1, 9).map(Number) as number[];
    const busy = user! + nice! + system! + irq! + softirq! + steal!;
    return Number.isFinite(busy) ? { busy, kernel: system! + irq! + softirq!, all: busy + idle! + iowait! } : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Starts counting the whole machine's CPU, every process's (the service's, PostgreSQL's, NATS's
 * and the bench's own): `stop(items)` gives the milliseconds per item (and of those, the kernel's:
 * system calls, interrupts, wake-ups) and the cores in use on average since, or undefined where /proc is not there. What a merchant's create costs the machine
 * in all, where a per-process meter would miss a helper nobody thought to count.
 */
export function meterMachine(): { stop(items: number): { msPerItem: number; kernelMsPerItem: number; cores: number } | undefined } {
  const start = machineTicks();
  return {
    stop(items) {
      const end = machineTicks();
      if (!start || !end || items <= 0 || end.all <= start.all) return undefined;
      const busy = end.busy - start.busy;
      // /proc/stat's line sums every core's ticks: its total over the window is the cores times the window.
      const cores = (availableParallelism() * busy) / (end.all - start.all);
      return { msPerItem: (busy * msPerTick) / items, kernelMsPerItem: ((end.kernel - start.kernel) * msPerTick) / items, cores };
    },
  };
}
