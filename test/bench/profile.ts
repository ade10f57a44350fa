// CPU profiles of the service process while a scenario runs, through its inspector (the same
// V8 sampling profiler as --cpu-prof, started and stopped around one run), summarised as the
// top consumers of its busy time: packages, Node's own modules, our files, GC.
import path from "node:path";

/** A V8 CPU profile (Profiler.stop's result, the format --cpu-prof writes). */
export interface CpuProfile {
  nodes: { id: number; callFrame: { functionName: string; url: string }; hitCount?: number }[];
  samples?: number[];
  timeDeltas?: number[];
  startTime: number;
  endTime: number;
}

export interface Consumer {
  name: string;
  /** Share of the busy (non-idle) samples. */
  share: number;
}

export interface ProfileSummary {
  /** Share of the wall time the process was busy (not idle). */
  busy: number;
  /**
   * Share of the wall time its event loop was on a core (from /proc, where there is one). The
   * sampler counts wall time: when every core is taken, a thread that woke another process
   * (a socket write) waits for the core back, and those samples land in the write.
   */
  onCpu?: number;
  top: Consumer[];
}

const root = path.resolve(import.meta.dirname, "../..");

/** Who a sample belongs to: a package, a Node module, one of our files, or a V8 pseudo-frame. */
export function consumerOf(functionName: string, url: string): string | undefined {
  if (functionName === "(idle)") return undefined;
  if (functionName === "(garbage collector)") return "garbage collection";
  if (functionName === "(program)") return "V8 and native code (program)";
  if (url === "") return functionName === "(root)" ? "V8 and native code (program)" : `native: ${functionName || "(anonymous)"}`;
  const file = url.startsWith("file://") ? decodeURIComponent(new URL(url).pathname) : url;
  const modules = file.lastIndexOf("/node_modules/");
  if (modules >= 0) {
    const [scope, name] = file.slice(modules + "/node_modules/".length).split("/");
    return scope?.startsWith("@") ? `${scope}/${name}` : (scope ?? file);
  }
  if (file.startsWith("node:")) {
    const parts = file.slice("node:".length).split("/");
    return `node:${parts[0] === "internal" ? (parts[1] ?? "internal").replace(/\.js$/, "") : parts[0]}`;
  }
  return file.startsWith(root) ? path.relative(root, file) : file;
}

/** The busy share and the top consumers of a profile, by self time (samples). */
export function summarise(profile: CpuProfile, top = 6): ProfileSummary {
  const byNode = new Map(profile.nodes.map((n) => [n.id, n]));
  const counts = new Map<string, number>();
  let busy = 0;
  let total = 0;
  const add = (id: number, hits: number) => {
    const node = byNode.get(id);
    if (!node) return;
    total += hits;
    const name = consumerOf(node.callFrame.functionName, node.callFrame.url);
    if (name === undefined) return;
    busy += hits;
    counts.set(name, (counts.get(name) ?? 0) + hits);
  };
  if (profile.samples && profile.samples.length > 0) {
    for (const id of profile.samples) add(id, 1);
  } else {
    for (const n of profile.nodes) add(n.id, n.hitCount ?? 0);
  }
  const ranked = [...counts.entries()].sort((a, b) => b[1] - a[1]).slice(0, top);
  return { busy: total === 0 ? 0 : busy / total, top: ranked.map(([name, n]) => ({ name, share: busy === 0 ? 0 : n / busy })) };
}

export function describeSummary(s: ProfileSummary): string {
  const onCpu = s.onCpu === undefined ? "" : ` (on a core ${Math.round(s.onCpu * 100)} %; the rest of it waiting for one)`;
  return `busy ${Math.round(s.busy * 100)} % of the run${onCpu}; top: ${s.top.map((c) => `${c.name} ${Math.round(c.share * 100)} %`).join(", ")}`;
}

/** A connection to a process's inspector (started with --inspect=host:port). */
export class Inspector {
  #ws: WebSocket;
  #next = 1;
  #pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();

  private constructor(ws: WebSocket) {
    this.#ws = ws;
    ws.addEventListener("message", (event) => {
      const msg = JSON.parse(String(event.data)) as { id?: number; result?: unknown; error?: { message: string } };
      const pending = msg.id === undefined ? undefined : this.#pending.get(msg.id);
      if (!pending || msg.id === undefined) return;
      this.#pending.delete(msg.id);
      if (msg.error) pending.reject(new Error(msg.error.message));
      else pending.resolve(msg.result);
    });
  }

  static async connect(hostPort: string): Promise<Inspector> {
    const targets = (await (await fetch(`http://${hostPort}/json/list`)).json()) as { webSocketDebuggerUrl: string }[];
    const url = targets[0]?.webSocketDebuggerUrl;
    if (!url) throw new Error(`no inspector target at ${hostPort}`);
    const ws = new WebSocket(url);
    await new Promise<void>((resolve, reject) => {
      ws.addEventListener("open", () => resolve(), { once: true });
      ws.addEventListener("error", () => reject(new Error(`cannot connect to the inspector at ${hostPort}`)), { once: true });
    });
    return new Inspector(ws);
  }

  call<T>(method: string, params: Record<string, unknown> = {}): Promise<T> {
    const id = this.#next++;
    return new Promise<T>((resolve, reject) => {
      this.#pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      this.#ws.send(JSON.stringify({ id, method, params }));
    });
  }

  /** Runs `work` under the CPU profiler (1 ms sampling) and returns the profile. */
  async profile(work: () => Promise<unknown>): Promise<CpuProfile> {
    await this.call("Profiler.enable");
    await this.call("Profiler.setSamplingInterval", { interval: 1000 });
    await this.call("Profiler.start");
    // Stopped even when the run fails, so the next scenario is not profiled by accident.
    const outcome = await work().then(
      () => undefined,
      (err: unknown) => ({ err }),
    );
    const { profile } = await this.call<{ profile: CpuProfile }>("Profiler.stop");
    if (outcome) throw outcome.err;
    return profile;
  }

  close(): void {
    this.#ws.close();
  }
}
