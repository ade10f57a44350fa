// CPU time per request by who spent it, read from /proc (Linux) around one load: the service's
// event loop, its other threads (address derivation, GC helpers, libuv), the PostgreSQL backends
// serving the bench's database, and the load generator (this process). A sampling profile shows
// only the event loop; on a machine whose cores are all busy, throughput is set by the sum.
import { readdirSync, readFileSync } from "node:fs";

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

interface Reading {
  process: number;
  eventLoop: number;
  backends: Map<number, number>;
  self: number;
}

function read(subject: CpuSubject): Reading | undefined {
  const whole = statTicks(String(subject.pid));
  const eventLoop = statTicks(mainThread(subject.pid));
  const self = statTicks("self");
  if (whole === undefined || eventLoop === undefined || self === undefined) return undefined;
  const backends = new Map<number, number>();
  for (const pid of backendsOf(subject.database)) {
    const ticks = statTicks(String(pid));
    if (ticks !== undefined) backends.set(pid, ticks);
  }
  return { process: whole, eventLoop, backends, self };
}

/**
 * Starts counting; `stop(requests)` gives the CPU per request since, or undefined where /proc
 * is not there. A backend that connected during the load counts whole (a pool may have closed
 * its idle connections before and open new ones under the load); one that exited is left out.
 */
export function meterCpu(subject: CpuSubject): { stop(requests: number): CpuPerRequest | undefined } {
  const start = read(subject);
  return {
    stop(requests) {
      const end = read(subject);
      if (!start || !end || requests <= 0) return undefined;
      const per = (ticks: number) => (ticks * msPerTick) / requests;
      let postgres = 0;
      for (const [pid, ticks] of end.backends) postgres += ticks - (start.backends.get(pid) ?? 0);
      const eventLoop = per(end.eventLoop - start.eventLoop);
      const otherThreads = per(end.process - start.process) - eventLoop;
      const loadGenerator = per(end.self - start.self);
      return { eventLoop, otherThreads, postgres: per(postgres), loadGenerator, total: eventLoop + otherThreads + per(postgres) + loadGenerator };
    },
  };
}

/**
 * Starts counting the CPU of named groups of processes (each group's pids are listed again at the
 * end, so a process that started meanwhile counts whole); `stop(items)` gives each group's
 * milliseconds of CPU per item, or undefined where /proc is not there.
 */
export function meterGroups<K extends string>(groups: Record<K, () => number[]>): { stop(items: number): Record<K, number> | undefined } {
  const ticksOf = () => {
    const out = new Map<K, Map<number, number>>();
    for (const [name, pids] of Object.entries(groups) as [K, () => number[]][]) {
      const m = new Map<number, number>();
      for (const pid of pids()) {
        const t = statTicks(String(pid));
        if (t !== undefined) m.set(pid, t);
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
      for (const [name, pids] of end) {
        let ticks = 0;
        for (const [pid, t] of pids) ticks += t - (start.get(name)?.get(pid) ?? 0);
        result[name] = (ticks * msPerTick) / items;
      }
      return result;
    },
  };
}
