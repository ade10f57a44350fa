// npm run bench [-- --quick] [-- --only create,list] [-- --no-profile]
// Starts the service on a fresh database and JetStream prefix, runs each scenario
// after a warm-up (several measured runs; one in --quick mode), then once more under the
// CPU profiler (not measured); fails when a checked target (MetricSpec.checked) is missed; writes bench-results.md and bench-results.json at the
// repository root, with the top CPU consumers of the service process per scenario.
import path from "node:path";
import { parseArgs } from "node:util";
import { eventLoopMs } from "./cpu.ts";
import { describeSummary, Inspector, summarise } from "./profile.ts";
import { met, report, type ScenarioReport } from "./report.ts";
import { grpcCreateScenario } from "./scenarios/grpc-create.ts";
import { createScenario } from "./scenarios/create.ts";
import { fiatCreateScenario } from "./scenarios/fiat-create.ts";
import { methodsCreateScenario } from "./scenarios/methods-create.ts";
import { merchantPathScenario } from "./scenarios/merchant-path.ts";
import { coldDrainScenario } from "./scenarios/cold-drain.ts";
import { deliveryScenario } from "./scenarios/delivery.ts";
import { backlogScenario } from "./scenarios/backlog.ts";
import { fairnessScenario } from "./scenarios/fairness.ts";
import { limitsScenario } from "./scenarios/limits.ts";
import { listScenario } from "./scenarios/list.ts";
import { exportScenario } from "./scenarios/export.ts";
import { replayScenario } from "./scenarios/replay.ts";
import { retentionScenario } from "./scenarios/retention.ts";
import { scaleScenario } from "./scenarios/scale.ts";
import { retryScenarios } from "./scenarios/retry.ts";
import { watcherScenario } from "./scenarios/watcher.ts";
import { bitcoinWatcherScenario } from "./scenarios/bitcoin-watcher.ts";
import { evmBigBlocksScenario } from "./scenarios/evm-big-blocks.ts";
import { spread } from "./stats.ts";
import { Cleanup, startSystem } from "./system.ts";
import type { BenchContext, RunResult, Scenario } from "./types.ts";

const { values } = parseArgs({
  options: { quick: { type: "boolean", default: false }, only: { type: "string" }, runs: { type: "string" }, "no-profile": { type: "boolean", default: false } },
});
const profiling = !values["no-profile"];
const quick = values.quick ?? false;
const runs = values.runs ? Number(values.runs) : quick ? 1 : 3;
const all: Scenario[] = [createScenario, grpcCreateScenario, fiatCreateScenario, methodsCreateScenario, merchantPathScenario, limitsScenario, replayScenario, listScenario, exportScenario, deliveryScenario, coldDrainScenario, fairnessScenario, backlogScenario, ...retryScenarios, watcherScenario, evmBigBlocksScenario, bitcoinWatcherScenario, retentionScenario, scaleScenario];
const only = values.only?.split(",").map((s) => s.trim());
const unknown = only?.filter((n) => !all.some((s) => s.name === n)) ?? [];
if (unknown.length > 0 || !Number.isInteger(runs) || runs < 1) {
  process.stderr.write(`bench: unknown scenario ${unknown.join(", ")} (scenarios: ${all.map((s) => s.name).join(", ")}), or bad --runs\n`);
  process.exit(2);
}
const scenarios = all.filter((s) => !only || only.includes(s.name));

const log = (message: string) => process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
const cleanup = new Cleanup();
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => void cleanup.run().finally(() => process.exit(130)));
}

const started = Date.now();
const reports: ScenarioReport[] = [];
let failed = false;
try {
  log(`starting the service (${quick ? "quick" : "full"} mode, ${runs} run(s) per scenario)`);
  const system = await startSystem(cleanup);
  let inspector: Inspector | undefined;
  cleanup.teardown(async () => inspector?.close());
  const ctx: BenchContext = { ...system, quick, log };
  for (const scenario of scenarios) {
    log(`${scenario.name}: ${scenario.title}`);
    const t0 = Date.now();
    try {
      await scenario.setup?.(ctx);
      await scenario.warmup?.(ctx);
      const results: RunResult[] = [];
      for (let i = 0; i < runs; i++) {
        const r = await scenario.run(ctx);
        log(`${scenario.name} run ${i + 1}/${runs}: ${Object.entries(r).map(([k, v]) => `${k}=${Math.round(v * 100) / 100}`).join(" ")}`);
        results.push(r);
      }
      const metrics = Object.fromEntries(Object.keys(scenario.metrics).map((k) => [k, spread(results.map((r) => r[k] ?? Number.NaN))]));
      const missed = Object.entries(scenario.metrics).filter(([k, spec]) => spec.checked && met(spec, metrics[k]!.median) !== true);
      for (const [k, spec] of missed) log(`${scenario.name}: ${spec.label} is ${metrics[k]!.median}, the checked target is ${spec.target?.op} ${spec.target?.value}${quick ? " (not failed in quick mode: one short run)" : ""}`);
      // A quick run is one short run on whatever else the machine does (CI's smoke run): checked
      // targets fail the bench on the median of full runs only.
      if (missed.length > 0 && !quick) failed = true;
      let profile: ScenarioReport["profile"];
      if (profiling && !scenario.ownSystem) {
        // One more run under the profiler, apart from the measured ones (sampling costs a little).
        inspector ??= await Inspector.connect(system.inspector);
        const [before, since] = [eventLoopMs(system.servicePid), Date.now()];
        profile = summarise(await inspector.profile(() => scenario.run(ctx)));
        const after = eventLoopMs(system.servicePid);
        if (before !== undefined && after !== undefined) profile.onCpu = (after - before) / (Date.now() - since);
        log(`${scenario.name} profile of the service process: ${describeSummary(profile)}`);
      }
      reports.push({ scenario, metrics, seconds: (Date.now() - t0) / 1000, profile });
    } catch (err) {
      failed = true;
      log(`${scenario.name} failed: ${(err as Error).stack ?? err}`);
      reports.push({ scenario, metrics: {}, seconds: (Date.now() - t0) / 1000, error: (err as Error).message });
    } finally {
      await scenario.teardown?.(ctx).catch(() => undefined);
    }
  }
  const root = path.resolve(import.meta.dirname, "../..");
  const written = await report(root, { quick, runs, reports, seconds: (Date.now() - started) / 1000, db: system.db });
  log(`wrote ${written.join(", ")} in ${Math.round((Date.now() - started) / 1000)} s`);
} catch (err) {
  failed = true;
  log(`bench failed: ${(err as Error).stack ?? err}`);
} finally {
  await cleanup.run();
}
process.exit(failed ? 1 : 0);
