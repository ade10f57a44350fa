import { writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { connect } from "@nats-io/transport-node";
import type { Database } from "../../services/platform/db.ts";
import { natsUrl } from "../helpers/harness.ts";
import { describeSummary, type ProfileSummary } from "./profile.ts";
import { round, type Spread } from "./stats.ts";
import type { MetricSpec, Scenario } from "./types.ts";

export interface ScenarioReport {
  scenario: Scenario;
  metrics: Record<string, Spread>;
  seconds: number;
  error?: string;
  /** The service process's CPU during one more run of the scenario. */
  profile?: ProfileSummary;
}

interface Machine {
  cores: number;
  cpu: string;
  memory_gib: number;
  node: string;
  postgresql: string;
  nats: string;
  os: string;
}

async function machine(db: Database): Promise<Machine> {
  const [pg] = await db.em.fork().execute<{ server_version: string }[]>("show server_version");
  const nc = await connect({ servers: natsUrl });
  const nats = nc.info?.version ?? "unknown";
  await nc.close();
  return {
    cores: os.availableParallelism(),
    cpu: os.cpus()[0]?.model ?? "unknown",
    memory_gib: round(os.totalmem() / 2 ** 30, 1),
    node: process.version,
    postgresql: pg?.server_version ?? "unknown",
    nats,
    os: `${os.type()} ${os.release()}`,
  };
}

export function met(spec: MetricSpec, value: number): boolean | undefined {
  if (!spec.target || Number.isNaN(value)) return undefined;
  return spec.target.op === ">=" ? value >= spec.target.value : value <= spec.target.value;
}

const show = (n: number) => (Number.isNaN(n) ? "n/a" : Math.abs(n) >= 100 ? String(Math.round(n)) : String(round(n, 2)));

export async function report(
  root: string,
  r: { quick: boolean; runs: number; reports: ScenarioReport[]; seconds: number; db: Database },
): Promise<string[]> {
  const m = await machine(r.db);
  const date = new Date().toISOString();
  const json = {
    date,
    mode: r.quick ? "quick" : "full",
    runs_per_scenario: r.runs,
    seconds: round(r.seconds, 1),
    machine: m,
    scenarios: r.reports.map((s) => ({
      name: s.scenario.name,
      title: s.scenario.title,
      seconds: round(s.seconds, 1),
      error: s.error,
      profile: s.profile && {
        busy: round(s.profile.busy, 3),
        ...(s.profile.onCpu === undefined ? {} : { onCpu: round(s.profile.onCpu, 3) }),
        top: s.profile.top.map((c) => ({ name: c.name, share: round(c.share, 3) })),
      },
      metrics: Object.fromEntries(
        Object.entries(s.scenario.metrics).map(([key, spec]) => {
          const v = s.metrics[key];
          return [key, { ...spec, ...(v ? { min: v.min, median: v.median, max: v.max, met: met(spec, v.median) } : {}) }];
        }),
      ),
    })),
  };
  const lines = [
    `# Benchmark results`,
    ``,
    `${date.slice(0, 16).replace("T", " ")} UTC, ${json.mode} mode, ${r.runs} measured run(s) per scenario after a warm-up, ${Math.round(r.seconds)} s in all.`,
    ``,
    `Machine: ${m.cores} cores (${m.cpu}), ${m.memory_gib} GiB, ${m.os}; Node ${m.node}, PostgreSQL ${m.postgresql}, NATS ${m.nats}.`,
    ``,
  ];
  for (const s of r.reports) {
    lines.push(`## ${s.scenario.title}`, ``);
    if (s.error) lines.push(`**Failed:** ${s.error}`, ``);
    lines.push(`| metric | unit | min | median | max | target | met |`, `|---|---|---|---|---|---|---|`);
    for (const [key, spec] of Object.entries(s.scenario.metrics)) {
      const v = s.metrics[key];
      const target = spec.target ? `${spec.target.op} ${spec.target.value}${spec.checked ? " (checked)" : ""}` : "";
      const ok = v ? met(spec, v.median) : undefined;
      lines.push(
        `| ${spec.label} | ${spec.unit} | ${v ? show(v.min) : "n/a"} | ${v ? show(v.median) : "n/a"} | ${v ? show(v.max) : "n/a"} | ${target} | ${ok === undefined ? "" : ok ? "yes" : "**no**"} |`,
      );
    }
    lines.push(``);
    if (s.profile) lines.push(`CPU profile of the service process (one more run): ${describeSummary(s.profile)}.`, ``);
  }
  const md = path.join(root, "bench-results.md");
  const js = path.join(root, "bench-results.json");
  writeFileSync(md, lines.join("\n"));
  writeFileSync(js, JSON.stringify(json, null, 2) + "\n");
  return [md, js];
}
